"""Turn a ``postgresql://`` URL into Django's DATABASES entry (no extra dependency)."""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit


def parse(url: str) -> dict:
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql"}:
        raise ValueError(f"DATABASE_URL must be a postgresql:// URL, not {parts.scheme!r}")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    host = query.pop("host", None) or unquote(parts.hostname or "")
    return {
        "ENGINE": "switchboard.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "postgres",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(parts.port or ""),
        "OPTIONS": query,
    }


def build(settings_dict: dict, *, name: str | None = None) -> str:
    """The inverse, for handing a database (e.g. the test database) to a subprocess."""
    from urllib.parse import quote

    user = quote(settings_dict.get("USER") or "")
    password = quote(settings_dict.get("PASSWORD") or "")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = settings_dict.get("HOST") or ""
    port = settings_dict.get("PORT") or ""
    db = quote(name or settings_dict["NAME"])
    if host.startswith("/"):
        return f"postgresql://{auth}/{db}?host={quote(host)}"
    netloc = host + (f":{port}" if port else "")
    return f"postgresql://{auth}{netloc}/{db}"
