"""Ed25519 signing (RFC 8032 section 5.1), in pure Python, for Ollama's signed token requests.

Why not a dependency: weightkit signs one short string per token request, with a key that only identifies
the user to ollama.com, so ~40 lines of the RFC's arithmetic (about 10 ms a signature) beat making every
install carry `cryptography` for it. Signing is deterministic, so the tests check these signatures byte for
byte against the RFC's test vectors and, where `cryptography` is installed, against it. The arithmetic is not
constant-time: fine for a key signing a few requests a run, not for a signing service under observation.
"""

from __future__ import annotations

import hashlib

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493  # the group order
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)

Point = tuple[int, int, int, int]  # extended coordinates (X, Y, Z, T), x = X/Z, y = Y/Z, x*y = T/Z


def _recover_x(y: int) -> int:
    xx = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P)
    x = pow(xx, (_P + 3) // 8, _P)
    if (x * x - xx) % _P:
        x = x * _SQRT_M1 % _P
    return _P - x if x & 1 else x


_BY = 4 * pow(5, _P - 2, _P) % _P
_BASE: Point = (_recover_x(_BY), _BY, 1, _recover_x(_BY) * _BY % _P)


def _add(p: Point, q: Point) -> Point:
    a = (p[1] - p[0]) * (q[1] - q[0]) % _P
    b = (p[1] + p[0]) * (q[1] + q[0]) % _P
    c = 2 * p[3] * q[3] * _D % _P
    d = 2 * p[2] * q[2] % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _multiply(k: int, p: Point) -> Point:
    q: Point = (0, 1, 1, 0)
    while k:
        if k & 1:
            q = _add(q, p)
        p = _add(p, p)
        k >>= 1
    return q


def _encode(p: Point) -> bytes:
    z_inv = pow(p[2], _P - 2, _P)
    x, y = p[0] * z_inv % _P, p[1] * z_inv % _P
    return (y | (x & 1) << 255).to_bytes(32, "little")


def _expand(seed: bytes) -> tuple[int, bytes]:
    """The secret scalar and the nonce prefix of a 32-byte private key."""
    if len(seed) != 32:
        raise ValueError("an Ed25519 private key is 32 bytes")
    h = hashlib.sha512(seed).digest()
    a = int.from_bytes(h[:32], "little") & ((1 << 254) - 8) | (1 << 254)
    return a, h[32:]


def public_key(seed: bytes) -> bytes:
    """The 32-byte public key of a 32-byte private key."""
    return _encode(_multiply(_expand(seed)[0], _BASE))


def sign(seed: bytes, message: bytes) -> bytes:
    """The 64-byte signature of `message` by the private key `seed`."""
    a, prefix = _expand(seed)
    public = _encode(_multiply(a, _BASE))
    r = int.from_bytes(hashlib.sha512(prefix + message).digest(), "little") % _L
    big_r = _encode(_multiply(r, _BASE))
    k = int.from_bytes(hashlib.sha512(big_r + public + message).digest(), "little") % _L
    return big_r + ((r + k * a) % _L).to_bytes(32, "little")
