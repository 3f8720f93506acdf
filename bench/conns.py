#!/usr/bin/env python3
"""Opens N keep-alive connections to HOST:PORT, sends one GET on each (with one of 1,000
session cookies on 90 % of them, as the load test's sessions), reads each response, then
keeps every connection open until SIGTERM or SIGINT. Prints "open N ok M failed K" once
all are established.

    conns.py [--tls] HOST PORT N [ROUTES]

With --tls, each connection is TLS (HTTP/1.1 by ALPN, the certificate not checked)."""
import asyncio
import signal
import ssl
import sys

ARGS = sys.argv[1:]
TLS = None
if ARGS and ARGS[0] == "--tls":
    ARGS = ARGS[1:]
    TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    TLS.check_hostname = False
    TLS.verify_mode = ssl.CERT_NONE
    TLS.set_alpn_protocols(["http/1.1"])
HOST, PORT, N = ARGS[0], int(ARGS[1]), int(ARGS[2])
ROUTES = ARGS[3].split(",") if len(ARGS) > 3 else ["n1", "n2", "n3"]
SESSIONS = 1000
BATCH = 250


async def one(i, conns):
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection(HOST, PORT, ssl=TLS), 30)
    except Exception:
        return False
    conns.append(w)
    cookie = ""
    if i % 10:
        n = i % SESSIONS
        cookie = "Cookie: JSESSIONID=%032X.%s\r\n" % (n, ROUTES[n % len(ROUTES)])
    w.write(("GET /small HTTP/1.1\r\nHost: bench\r\n%s\r\n" % cookie).encode())
    try:
        head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 30)
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        if length:
            await asyncio.wait_for(r.readexactly(length), 30)
        return head.startswith(b"HTTP/1.1 200")
    except Exception:
        return False


async def main():
    conns = []
    ok = failed = 0
    for start in range(0, N, BATCH):
        res = await asyncio.gather(*(one(i, conns) for i in range(start, min(N, start + BATCH))))
        ok += sum(res)
        failed += len(res) - sum(res)
    print("open %d ok %d failed %d" % (len(conns), ok, failed), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    await stop.wait()
    for w in conns:
        w.close()


asyncio.run(main())
