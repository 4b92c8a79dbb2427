"""A TLS front for a plain-HTTP server on loopback, for a gateway that reaches its model only
over TLS (LiteLLM's WebSocket mode hands websockets an SSL setting even for a `ws://` model,
which it refuses). At start it makes a certificate for 127.0.0.1, its own authority, and writes
it where the gateway is told to trust it; then it relays every connection's bytes both ways to
the server, whatever they carry (HTTP, a stream, a WebSocket), until either side ends it.

It serves the gateway the harness started, nothing else: it listens on loopback only, and
stopping it closes every connection it holds."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

LOOPBACK = "127.0.0.1"
READ_SIZE = 2**16
STOP_DEADLINE_S = 10.0


def certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, valid a day either side of now, that is its own
    authority (so a client trusts it as its CA file); written to `folder` as `tls-cert.pem`
    and `tls-key.pem` (readable by its owner only)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "responses-parity loopback")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(LOOPBACK))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "tls-cert.pem", folder / "tls-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.touch(mode=0o600)
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@dataclass
class TlsFront:
    """A running front: `url` (https) relays to the server it was started for; clients trust
    `ca_file`."""

    url: str
    ca_file: Path
    _loop: asyncio.AbstractEventLoop = field(repr=False)
    _server: asyncio.Server = field(repr=False)
    _thread: threading.Thread = field(repr=False)
    _relays: set[asyncio.Task[None]] = field(default_factory=set, repr=False)

    def stop(self) -> None:
        """Stop listening and close every relayed connection."""
        async def close() -> None:
            self._server.close()
            for relay in list(self._relays):
                relay.cancel()
            await asyncio.gather(*self._relays, return_exceptions=True)

        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(STOP_DEADLINE_S)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(STOP_DEADLINE_S)


def start_tls_front(server_url: str, folder: Path) -> TlsFront:
    """A TLS front on a free loopback port for the plain-HTTP server at `server_url`, its
    certificate written to `folder`."""
    target = urlsplit(server_url)
    host, port = target.hostname or LOOPBACK, target.port or 80
    cert_file, key_file = certificate(folder)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    loop = asyncio.new_event_loop()
    relays: set[asyncio.Task[None]] = set()

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        relay = asyncio.current_task()
        assert relay is not None
        relays.add(relay)
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            relays.discard(relay)
            return
        pipes = [asyncio.ensure_future(_pipe(reader, upstream_writer)),
                 asyncio.ensure_future(_pipe(upstream_reader, writer))]
        try:  # one side ending ends the connection (neither HTTP nor a WebSocket half-closes)
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pipe in pipes:
                pipe.cancel()
            for side in (writer, upstream_writer):
                side.close()
            relays.discard(relay)

    server = loop.run_until_complete(asyncio.start_server(accepted, LOOPBACK, 0, ssl=context))
    listening = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, name=f"parity-tls-front-{listening}", daemon=True)
    thread.start()
    return TlsFront(f"https://{LOOPBACK}:{listening}", cert_file, loop, server, thread, relays)


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy `source` to `sink` until it ends or fails."""
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while chunk := await source.read(READ_SIZE):
            sink.write(chunk)
            await sink.drain()
