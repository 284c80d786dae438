package com.example.basra.lobby;

import java.io.IOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.SecureRandom;
import java.security.spec.ECGenParameterSpec;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.Date;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.ExtendedKeyUsage;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.asn1.x509.KeyPurposeId;
import org.bouncycastle.asn1.x509.KeyUsage;
import org.bouncycastle.cert.CertIOException;
import org.bouncycastle.cert.X509v3CertificateBuilder;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.operator.OperatorCreationException;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;

/**
 * A CA and the server and client certificates it signs, made on the spot as PEM files (P-256
 * keys, a day long; the server's certificate names localhost and 127.0.0.1).
 */
record TestCertificates(Path ca, Path serverCert, Path serverKey, Path clientCert, Path clientKey) {
  private static final X500Name CA = new X500Name("CN=basra test CA");
  private static final SecureRandom RANDOM = new SecureRandom();

  static TestCertificates make(Path dir) throws Exception {
    KeyPair caKeys = keys();
    X509v3CertificateBuilder ca = builder(CA, CA, caKeys)
        .addExtension(Extension.basicConstraints, true, new BasicConstraints(true))
        .addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.keyCertSign));
    write(dir.resolve("ca.crt"), "CERTIFICATE", sign(ca, caKeys));

    KeyPair serverKeys = keys();
    GeneralNames names = new GeneralNames(new GeneralName[] {
        new GeneralName(GeneralName.dNSName, "localhost"),
        new GeneralName(GeneralName.iPAddress, "127.0.0.1")});
    X509v3CertificateBuilder server = leaf("server", serverKeys, KeyPurposeId.id_kp_serverAuth)
        .addExtension(Extension.subjectAlternativeName, false, names);
    write(dir.resolve("server.crt"), "CERTIFICATE", sign(server, caKeys));
    write(dir.resolve("server.key"), "PRIVATE KEY", serverKeys.getPrivate().getEncoded());

    KeyPair clientKeys = keys();
    X509v3CertificateBuilder client = leaf("client", clientKeys, KeyPurposeId.id_kp_clientAuth);
    write(dir.resolve("client.crt"), "CERTIFICATE", sign(client, caKeys));
    write(dir.resolve("client.key"), "PRIVATE KEY", clientKeys.getPrivate().getEncoded());

    return new TestCertificates(dir.resolve("ca.crt"), dir.resolve("server.crt"),
        dir.resolve("server.key"), dir.resolve("client.crt"), dir.resolve("client.key"));
  }

  private static KeyPair keys() throws GeneralSecurityException {
    KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
    generator.initialize(new ECGenParameterSpec("secp256r1"));
    return generator.generateKeyPair();
  }

  private static X509v3CertificateBuilder builder(X500Name issuer, X500Name subject, KeyPair keys) {
    Instant now = Instant.now();
    return new JcaX509v3CertificateBuilder(issuer, new BigInteger(64, RANDOM),
        Date.from(now.minus(Duration.ofMinutes(5))), Date.from(now.plus(Duration.ofDays(1))),
        subject, keys.getPublic());
  }

  private static X509v3CertificateBuilder leaf(String name, KeyPair keys, KeyPurposeId usage)
      throws CertIOException {
    return builder(CA, new X500Name("CN=" + name), keys)
        .addExtension(Extension.basicConstraints, true, new BasicConstraints(false))
        .addExtension(Extension.extendedKeyUsage, false, new ExtendedKeyUsage(usage));
  }

  private static byte[] sign(X509v3CertificateBuilder certificate, KeyPair issuer)
      throws OperatorCreationException, IOException {
    return certificate.build(new JcaContentSignerBuilder("SHA256withECDSA").build(issuer.getPrivate()))
        .getEncoded();
  }

  private static void write(Path file, String type, byte[] der) throws IOException {
    String body = Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII)).encodeToString(der);
    Files.writeString(file, "-----BEGIN " + type + "-----\n" + body + "\n-----END " + type + "-----\n");
  }
}
