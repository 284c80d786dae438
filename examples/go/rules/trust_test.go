package rules_test

// The trusted server's secrets, made on the spot for one run: a CA, a server certificate and a
// client certificate for mutual TLS, and a signing key (nothing secret is kept in the
// repository).

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
	caFile, certFile, keyFile string   // the client's
	env                       []string // BASRA_TLS_CERT, _KEY, _CLIENT_CA, BASRA_SIGNING_KEYS
}

// makeTrust writes a CA, a server certificate for 127.0.0.1 and localhost and a client
// certificate signed by it, and their keys, into dir, and draws a 32-byte signing key.
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
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), pemOf("CERTIFICATE", caDER), 0o600); err != nil {
		return nil, err
	}
	server := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	client := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "go lobby"},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for name, template := range map[string]*x509.Certificate{"server": server, "client": client} {
		template.NotBefore, template.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
		template.KeyUsage = x509.KeyUsageDigitalSignature
		if err := issue(dir, name, template, ca, caKey); err != nil {
			return nil, err
		}
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	return &trust{
		caFile:   filepath.Join(dir, "ca.pem"),
		certFile: filepath.Join(dir, "client.pem"),
		keyFile:  filepath.Join(dir, "client-key.pem"),
		env: []string{
			"BASRA_TLS_CERT=" + filepath.Join(dir, "server.pem"),
			"BASRA_TLS_KEY=" + filepath.Join(dir, "server-key.pem"),
			"BASRA_TLS_CLIENT_CA=" + filepath.Join(dir, "ca.pem"),
			"BASRA_SIGNING_KEYS=" + signingKeyID + ":" + base64.StdEncoding.EncodeToString(secret),
		},
	}, nil
}

// issue writes NAME.pem, a certificate of template signed by the CA, and NAME-key.pem, its
// fresh key (PKCS #8).
func issue(dir, name string, template, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	certDER, err := x509.CreateCertificate(rand.Reader, template, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".pem"), pemOf("CERTIFICATE", certDER), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+"-key.pem"), pemOf("PRIVATE KEY", keyDER), 0o600)
}

func pemOf(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}
