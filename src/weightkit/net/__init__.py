"""The network layer weightkit's registry client (`weightkit.registry`) and remote reading (`weightkit.remote`)
share: HTTP over http.client with credentials kept to their origin (`http`)."""
