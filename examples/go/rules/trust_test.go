package rules_test

// The trusted server's secrets, made on the spot for one run: a CA and a server certificate
// for TLS, and a signing key (nothing secret is kept in the repository).

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// signingKeyID names the trusted server's signing key (ErrorInfo metadata keyId).
const signingKeyID = "go-test"

type trust struct {
	caFile string
	env    []string // BASRA_TLS_CERT, BASRA_TLS_KEY, BASRA_SIGNING_KEYS
}

// makeTrust writes a CA, a certificate for 127.0.0.1 and localhost signed by it, and its key
// into dir, and draws a 32-byte signing key.
func makeTrust(dir string) (*trust, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "basra go test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	serverKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serverDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}, ca, &serverKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(serverKey)
	if err != nil {
		return nil, err
	}
	files := map[string]*pem.Block{
		"ca.pem":         {Type: "CERTIFICATE", Bytes: caDER},
		"server.pem":     {Type: "CERTIFICATE", Bytes: serverDER},
		"server-key.pem": {Type: "PRIVATE KEY", Bytes: keyDER},
	}
	for name, block := range files {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			return nil, err
		}
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	return &trust{
		caFile: filepath.Join(dir, "ca.pem"),
		env: []string{
			"BASRA_TLS_CERT=" + filepath.Join(dir, "server.pem"),
			"BASRA_TLS_KEY=" + filepath.Join(dir, "server-key.pem"),
			"BASRA_SIGNING_KEYS=" + signingKeyID + ":" + base64.StdEncoding.EncodeToString(secret),
		},
	}, nil
}
