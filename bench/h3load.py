#!/usr/bin/env python3
"""HTTP/3 load for bench/http3, on aioquic (pip install aioquic; no HTTP/3 load generator
is packaged here: h2load and curl are built without it).

    h3load.py keepalive HOST PORT REQUESTS CONNECTIONS STREAMS PATH
        REQUESTS GETs of PATH over CONNECTIONS connections, STREAMS in flight on each;
        prints "requests N failed K seconds S".
    h3load.py connect HOST PORT N PATH
        N new connections one after another, one GET each; prints the same line.
    h3load.py hold HOST PORT N PATH
        N connections, one GET each, then held open until SIGTERM or SIGINT; prints
        "open N ok M" once all are established.

The certificate is not checked. aioquic is Python: it is the bottleneck of the rates, which
is why bench/http3 reports the proxy's CPU time per request rather than a rate.
"""
import asyncio
import signal
import ssl
import sys
import time

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration


class Client(QuicConnectionProtocol):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.h3 = H3Connection(self._quic)
        self.waiting = {}

    def quic_event_received(self, event):
        for e in self.h3.handle_event(event):
            w = self.waiting.get(e.stream_id)
            if w is None:
                continue
            if isinstance(e, HeadersReceived):
                w[1] = dict(e.headers).get(b":status")
            if getattr(e, "stream_ended", False) and not w[0].done():
                w[0].set_result(w[1])

    async def get(self, authority, path):
        sid = self._quic.get_next_available_stream_id()
        done = asyncio.get_running_loop().create_future()
        self.waiting[sid] = [done, None]
        self.h3.send_headers(
            sid,
            [(b":method", b"GET"), (b":scheme", b"https"),
             (b":authority", authority.encode()), (b":path", path.encode())],
            end_stream=True,
        )
        self.transmit()
        try:
            return await asyncio.wait_for(done, 30) == b"200"
        finally:
            self.waiting.pop(sid, None)


def config():
    c = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost")
    c.verify_mode = ssl.CERT_NONE
    c.idle_timeout = 600
    return c


async def keepalive(host, port, total, conns, streams, path):
    authority = f"{host}:{port}"
    counts = {"ok": 0, "failed": 0}
    per = total // conns

    async def one():
        async with connect(host, port, configuration=config(), create_protocol=Client) as c:
            left = per

            async def worker(n):
                for _ in range(n):
                    ok = await c.get(authority, path)
                    counts["ok" if ok else "failed"] += 1

            shares = [left // streams + (1 if i < left % streams else 0) for i in range(streams)]
            await asyncio.gather(*(worker(n) for n in shares))

    start = time.monotonic()
    await asyncio.gather(*(one() for _ in range(conns)))
    took = time.monotonic() - start
    print(f"requests {counts['ok']} failed {counts['failed']} seconds {took:.3f}", flush=True)


async def new_connections(host, port, n, path):
    authority = f"{host}:{port}"
    ok = failed = 0
    start = time.monotonic()
    for _ in range(n):
        try:
            async with connect(host, port, configuration=config(), create_protocol=Client) as c:
                if await c.get(authority, path):
                    ok += 1
                else:
                    failed += 1
        except Exception:  # noqa: BLE001 - counted, the run goes on
            failed += 1
    took = time.monotonic() - start
    print(f"requests {ok} failed {failed} seconds {took:.3f}", flush=True)


async def hold(host, port, n, path):
    authority = f"{host}:{port}"
    held, ok = [], 0
    for _ in range(n):
        cm = connect(host, port, configuration=config(), create_protocol=Client)
        c = await cm.__aenter__()
        ok += await c.get(authority, path)
        held.append(cm)
    print(f"open {len(held)} ok {ok}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    await stop.wait()


def main():
    mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rest = sys.argv[4:]
    if mode == "keepalive":
        run = keepalive(host, port, int(rest[0]), int(rest[1]), int(rest[2]), rest[3])
    elif mode == "connect":
        run = new_connections(host, port, int(rest[0]), rest[1])
    elif mode == "hold":
        run = hold(host, port, int(rest[0]), rest[1])
    else:
        sys.exit(__doc__)
    asyncio.run(run)


if __name__ == "__main__":
    main()
