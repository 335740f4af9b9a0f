"""weightkit's version, in one place: the package, pyproject.toml and the HTTP user agents read it here."""

__version__ = "0.1.0"
