"""A TLS front for a plain-HTTP server on loopback, for a gateway that reaches its model only
over TLS (LiteLLM's WebSocket mode hands websockets an SSL setting even for a `ws://` model,
which it refuses). At start it makes a certificate for 127.0.0.1, its own authority, and writes
it where the gateway is told to trust it; then it relays every connection's bytes both ways to
the server, whatever they carry (HTTP, a stream, a WebSocket), until either side ends it.

It serves the gateway the harness started, nothing else: it listens on loopback only, and
stopping it closes every connection it holds."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import selectors
import socket
import socketserver
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
    _server: _Server = field(repr=False)
    _thread: threading.Thread = field(repr=False)

    def stop(self) -> None:
        """Stop listening and close every relayed connection."""
        self._server.shutdown()
        self._server.server_close()
        self._server.close_relays()
        self._thread.join(STOP_DEADLINE_S)


class _Server(socketserver.ThreadingTCPServer):
    """Each accepted connection in a thread of its own: its TLS handshake, then its bytes relayed
    to the server and back in that thread, so the TLS socket is read and written from one thread
    only."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, context: ssl.SSLContext, target: tuple[str, int]) -> None:
        super().__init__((LOOPBACK, 0), _Relay)
        self.context = context
        self.target = target
        self.relays: set[socket.socket] = set()
        self.lock = threading.Lock()

    def close_relays(self) -> None:
        with self.lock:
            for relayed in list(self.relays):
                with contextlib.suppress(OSError):
                    relayed.shutdown(socket.SHUT_RDWR)
                relayed.close()
            self.relays.clear()


class _Relay(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        server = self.server
        self.request.settimeout(STOP_DEADLINE_S)  # for the handshake and the connection to the server
        try:
            client = server.context.wrap_socket(self.request, server_side=True)
        except (OSError, ssl.SSLError):  # a client that does not trust the certificate, say
            return
        try:
            upstream = socket.create_connection(server.target, timeout=STOP_DEADLINE_S)
        except OSError:
            client.close()
            return
        client.settimeout(None)
        upstream.settimeout(None)
        with server.lock:
            server.relays.update((client, upstream))
        try:
            _relay(client, upstream)
        finally:
            with server.lock:
                server.relays.difference_update((client, upstream))
            for side in (client, upstream):
                side.close()


def _relay(client: ssl.SSLSocket, upstream: socket.socket) -> None:
    """Copy each side's bytes to the other until either ends or fails (neither HTTP nor a
    WebSocket half-closes, so one side ending ends the connection)."""
    with selectors.DefaultSelector() as selector, contextlib.suppress(OSError, ssl.SSLError):
        selector.register(client, selectors.EVENT_READ)
        selector.register(upstream, selectors.EVENT_READ)
        while _forwarded(client, upstream):
            for key, _ in selector.select():
                if key.fileobj is upstream:
                    chunk = upstream.recv(READ_SIZE)
                    if not chunk:
                        return
                    client.sendall(chunk)


def _forwarded(client: ssl.SSLSocket, upstream: socket.socket) -> bool:
    """Forward to the upstream all the client sent that can be read without waiting, and whether
    the client is still there. TLS may have read bytes off the socket already (a request that
    came with the end of the handshake, the rest of a record), where select cannot see them, so
    the client is read until TLS wants more from the socket, not only when select says so."""
    client.settimeout(0)
    try:
        while True:
            try:
                chunk = client.recv(READ_SIZE)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                return True
            if not chunk:
                return False
            upstream.sendall(chunk)
    finally:
        client.settimeout(None)


def start_tls_front(server_url: str, folder: Path) -> TlsFront:
    """A TLS front on a free loopback port for the plain-HTTP server at `server_url`, its
    certificate written to `folder`."""
    target = urlsplit(server_url)
    cert_file, key_file = certificate(folder)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    # TLS 1.2: over 1.3, about one WebSocket upgrade in ten through the front got no answer on a
    # loaded machine (50 of 50 passed over 1.2 under the same load); loopback needs no more.
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    server = _Server(context, (target.hostname or LOOPBACK, target.port or 80))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                              name=f"parity-tls-front-{server.server_address[1]}", daemon=True)
    thread.start()
    return TlsFront(f"https://{LOOPBACK}:{server.server_address[1]}", cert_file, server, thread)
