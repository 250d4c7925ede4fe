"""The gunicorn worker ``switchboard serve`` runs: uvicorn's, with uvloop and httptools, the
lifespan on, and the open-files limit raised so one worker can hold thousands of waiting
connections (docs/deploy.md: file descriptors)."""

from __future__ import annotations

import logging
import resource

from uvicorn_worker import UvicornWorker

log = logging.getLogger("switchboard.serve")


class Worker(UvicornWorker):
    CONFIG_KWARGS = {"loop": "uvloop", "http": "httptools", "lifespan": "on"}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # uvicorn writes its own access lines; none when gunicorn's access log is off.
        self.config.access_log = bool(self.cfg.accesslog)

    def init_process(self) -> None:
        raise_open_files_limit()
        super().init_process()


def raise_open_files_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit (each connection is
    one); returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            log.warning("could not raise the open-files limit above %s", soft)
    return soft
