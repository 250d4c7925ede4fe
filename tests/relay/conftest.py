"""The relay tests here share tests/test_relay.py's fixtures (where the relay's first tests
and their helpers live): what the stub agent saw (``out``) and the relay's environment
(``relay_env``)."""

from tests.test_relay import out, relay_env

__all__ = ["out", "relay_env"]
