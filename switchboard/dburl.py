"""Turn a ``postgresql://`` URL into Django's DATABASES entry, as libpq reads the same URL
(no extra dependency): several hosts (``postgresql://u@h1:5432,h2:5433/db``, each with its
own port or none), bracketed IPv6 addresses, percent-escapes, and every query parameter
handed to libpq as it is (``target_session_attrs=read-write``, ``connect_timeout``,
``sslmode`` …; ``host`` and ``port`` in the query win over the netloc's, as in libpq). The
hosts and ports go to libpq as its comma-separated lists, so it tries them in order and
``target_session_attrs`` picks the writable one: a primary failover needs no other setting
(docs/deploy.md)."""

from __future__ import annotations

from urllib.parse import parse_qs, quote, unquote, urlsplit


def parse(url: str) -> dict:
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql"}:
        raise ValueError(f"DATABASE_URL must be a postgresql:// URL, not {parts.scheme!r}")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    hosts, ports = _hosts(hostlist)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    return {
        "ENGINE": "switchboard.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "postgres",
        "USER": unquote(user),
        "PASSWORD": unquote(password),
        "HOST": query.pop("host", None) or ",".join(hosts),
        "PORT": query.pop("port", None) or (",".join(ports) if any(ports) else ""),
        "OPTIONS": query,
    }


def _hosts(hostlist: str) -> tuple[list[str], list[str]]:
    """The netloc's hosts and their ports (an empty port: libpq's default for that host)."""
    hosts: list[str] = []
    ports: list[str] = []
    for item in hostlist.split(",") if hostlist else []:
        if item.startswith("["):  # [::1]:5432
            host, _, rest = item[1:].partition("]")
            port = rest.removeprefix(":")
        else:
            host, _, port = item.partition(":")
        if port and not (port.isascii() and port.isdigit()):
            raise ValueError(f"DATABASE_URL: the port of {item!r} is not a number")
        hosts.append(unquote(host))
        ports.append(port)
    return hosts, ports


def build(settings_dict: dict, *, name: str | None = None) -> str:
    """The inverse, for handing a database (e.g. the test database) to a subprocess."""
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
