"""How `basra-rules play` and `load` reach a server: plaintext, TLS, or mutual TLS.

Both take the same flags. `--tls-ca FILE` checks the server's certificate against a CA bundle
(`--tls` alone: against the system's roots); `--tls-cert FILE` and `--tls-key FILE` are this
client's own certificate and key for a server that requires them (mutual TLS), named as
`serve` names its own; `--tls-server-name NAME` is the name the server's certificate must
carry when the address does not (an IP address, a tunnel). Any of them means TLS. The files
are read and checked before the first call, with the server's own checks (wire.tls), so
an unusable one stops the command with exit status 2, the file and the problem named.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from wire.tls import TLSConfigError, check_pair, read_roots

Options = Sequence[tuple[str, str | int]]

# The published client settings (docs/integration.md, "Client settings"): a client pings a
# connection that has read nothing for KEEPALIVE_TIME_MS and drops it when no answer comes
# within KEEPALIVE_TIMEOUT_MS; with keepalive on, gRPC also sets the socket's TCP_USER_TIMEOUT
# to the timeout, so a connection whose sent data goes unacknowledged that long is dropped
# too. Without them a backend that vanishes without a reset keeps its share of the calls until
# Linux gives up on the connection (about 15 minutes). 10 s is the least grpc-go and grpc-java
# accept; the server permits pings every 5 s (service/server.py), with or without calls.
KEEPALIVE_TIME_MS = 10_000
KEEPALIVE_TIMEOUT_MS = 1_000
KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
    ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ("grpc.keepalive_permit_without_calls", 1),
    # gRPC core sends at most two pings without data between them unless told otherwise, which
    # would stop keepalive on an idle connection.
    ("grpc.http2.max_pings_without_data", 0),
)


@dataclass(frozen=True, slots=True)
class ClientTLS:
    """TLS as a client speaks it: the CA bundle to trust (None: the system's), this client's
    certificate and key (mutual TLS), the name the server's certificate must carry."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    server_name: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        """Channel credentials from the files, each read and checked."""
        if (self.cert is None) != (self.key is None):
            raise TLSConfigError("mutual TLS needs both --tls-cert and --tls-key")
        roots = None
        if self.ca is not None:
            roots = read_roots(self.ca, "CA", "--tls-ca", only_cas=False)
        chain = key = None
        if self.cert is not None and self.key is not None:
            chain, key = check_pair(self.cert, self.key, "--tls-cert", "--tls-key")
        return grpc.ssl_channel_credentials(roots, key, chain)

    def over(self, base: ClientTLS | None) -> ClientTLS:
        """These settings where given, `base`'s elsewhere (flags over a config's keys)."""
        if base is None:
            return self
        return ClientTLS(
            self.ca or base.ca,
            self.cert or base.cert,
            self.key or base.key,
            self.server_name or base.server_name,
        )

    def options(self) -> list[tuple[str, str | int]]:
        """Channel options: the server name to check, when given."""
        if self.server_name is None:
            return []
        return [("grpc.ssl_target_name_override", self.server_name)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the TLS flags of a client."""
    parser.add_argument(
        "--tls", action="store_true", help="speak TLS, checking the server against system roots"
    )
    parser.add_argument(
        "--tls-ca", metavar="FILE", help="PEM CA bundle to check the server's certificate (TLS)"
    )
    parser.add_argument(
        "--tls-cert", metavar="FILE", help="PEM certificate chain of this client (mutual TLS)"
    )
    parser.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert")
    parser.add_argument(
        "--tls-server-name", metavar="NAME", help="name the server's certificate must carry"
    )


def from_args(args: argparse.Namespace) -> ClientTLS | None:
    """The TLS the flags ask for; None for plaintext."""
    given = (args.tls_ca, args.tls_cert, args.tls_key, args.tls_server_name)
    if not args.tls and all(value is None for value in given):
        return None
    return ClientTLS(*given)


def channel_options(
    options: Options = (), *, service_config: str | None = None, keepalive: bool = True
) -> list[tuple[str, str | int]]:
    """Channel options with the published settings: keepalive (unless `keepalive` is false, to
    measure what it buys), the service config's text when given (grpcio keeps the first
    service config it is given, so it goes before `options`), then `options`."""
    published: list[tuple[str, str | int]] = list(KEEPALIVE_OPTIONS) if keepalive else []
    if service_config is not None:
        published.append(("grpc.service_config", service_config))
    return [*published, *options]


def channel(
    target: str,
    tls: ClientTLS | None = None,
    options: Options = (),
    *,
    credentials: grpc.ChannelCredentials | None = None,
    service_config: str | None = None,
    keepalive: bool = True,
) -> grpc.Channel:
    """A channel to `target` with the published settings (`channel_options`): plaintext, TLS
    from files (`tls`) or with credentials made already (`credentials`)."""
    chosen = channel_options(options, service_config=service_config, keepalive=keepalive)
    if tls is not None:
        chosen += tls.options()
        credentials = tls.credentials()
    if credentials is None:
        return grpc.insecure_channel(target, options=chosen)
    return grpc.secure_channel(target, credentials, options=chosen)


def aio_channel(
    target: str, tls: ClientTLS | None = None, options: Options = ()
) -> grpc.aio.Channel:
    """An asyncio channel to `target` with the published settings, plaintext or TLS."""
    chosen = channel_options(options)
    if tls is None:
        return grpc.aio.insecure_channel(target, options=chosen)
    return grpc.aio.secure_channel(target, tls.credentials(), options=[*chosen, *tls.options()])
