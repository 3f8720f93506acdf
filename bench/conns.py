#!/usr/bin/env python3
"""Opens N keep-alive connections to HOST:PORT, sends one GET on each (with one of 1,000
session cookies on 90 % of them, as the load test's sessions), reads each response, then
keeps every connection open until SIGTERM or SIGINT. Prints "open N ok M failed K" once
all are established.

    conns.py [--tls | --h2] HOST PORT N [ROUTES]

With --tls, each connection is TLS (HTTP/1.1 by ALPN, the certificate not checked); with
--h2, TLS with HTTP/2 by ALPN, the GET one stream (frames written here: no HTTP/2 library
is needed)."""
import asyncio
import signal
import ssl
import sys

ARGS = sys.argv[1:]
TLS = None
H2 = False
if ARGS and ARGS[0] in ("--tls", "--h2"):
    H2 = ARGS[0] == "--h2"
    ARGS = ARGS[1:]
    TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    TLS.check_hostname = False
    TLS.verify_mode = ssl.CERT_NONE
    TLS.set_alpn_protocols(["h2"] if H2 else ["http/1.1"])
HOST, PORT, N = ARGS[0], int(ARGS[1]), int(ARGS[2])
ROUTES = ARGS[3].split(",") if len(ARGS) > 3 else ["n1", "n2", "n3"]
SESSIONS = 1000
BATCH = 250


def frame(kind, flags, stream, payload):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def literal(index, value):
    """An HPACK literal field, its name from the static table: not indexed where the
    index fits the 4-bit prefix, else added to the dynamic table (6-bit prefix)."""
    assert len(value) < 127 and index < 63
    first = index if index < 15 else 0x40 | index
    return bytes([first, len(value)]) + value


async def one_h2(i, conns):
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection(HOST, PORT, ssl=TLS), 30)
    except Exception:
        return False
    conns.append(w)
    # GET (static 2), https (7), :path /small, :authority bench, and the session cookie.
    block = b"\x82\x87" + literal(4, b"/small") + literal(1, b"bench")
    if i % 10:
        n = i % SESSIONS
        block += literal(32, b"JSESSIONID=%032X.%s" % (n, ROUTES[n % len(ROUTES)].encode()))
    w.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"") + frame(1, 5, 1, block))
    try:
        status = None
        while True:
            head = await asyncio.wait_for(r.readexactly(9), 30)
            length = int.from_bytes(head[:3], "big")
            kind, flags = head[3], head[4]
            payload = await asyncio.wait_for(r.readexactly(length), 30)
            if kind == 4 and not flags & 1:
                w.write(frame(4, 1, 0, b""))
            if kind == 1 and status is None:
                # :status 200 is static entry 8.
                status = payload[:1] == b"\x88"
            if kind in (0, 1) and flags & 1:
                return bool(status)
    except Exception:
        return False


async def one(i, conns):
    if H2:
        return await one_h2(i, conns)
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
