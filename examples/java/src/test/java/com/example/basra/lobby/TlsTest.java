package com.example.basra.lobby;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import basra.v1.Rules.BotLevel;
import io.grpc.Status;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;

/** The client over mutual TLS: the server's certificate checked against a CA, and the
 *  client's own certificate for a server that requires one. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class TlsTest {
  private TestCertificates certificates;
  private RulesServer server;

  @BeforeAll
  void start(@TempDir Path dir) throws Exception {
    certificates = TestCertificates.make(dir);
    server = RulesServer.start(List.of(
        "--tls-cert", certificates.serverCert().toString(),
        "--tls-key", certificates.serverKey().toString(),
        "--tls-client-ca", certificates.ca().toString()), Map.of());
  }

  @AfterAll
  void stop() throws Exception {
    RulesServer.closeAll(server);
  }

  @Test
  void aClientWithItsCertificatePlaysOverTls() throws Exception {
    RulesClient.Tls tls = new RulesClient.Tls(
        certificates.ca(), certificates.clientCert(), certificates.clientKey());
    try (RulesClient rules = server.connect(tls)) {
      Match match = Match.start(rules, MatchTest.seed("java over tls"), List.of());
      int seat = match.state().getToMove();
      assertEquals(1, match.playBot(seat, BotLevel.BOT_LEVEL_RANDOM).getState().getSeq());
    }
  }

  @Test
  void aClientWithoutACertificateIsRefused() throws Exception {
    RulesClient.Tls serverOnly = new RulesClient.Tls(certificates.ca(), null, null);
    try (RulesClient rules = RulesClient.connect(server.target(), RulesServer.SERVICE_CONFIG, serverOnly)) {
      Refusal refusal = assertThrows(Refusal.class, rules::serving);
      assertEquals(Status.Code.UNAVAILABLE, refusal.code());
      assertTrue(refusal.retryDelay().isEmpty());
    }
  }
}
