package providertest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GoogleTokenPath is the fake's OAuth 2.0 token endpoint for Google
// service accounts: the token_uri of GoogleServiceAccount's key file.
const GoogleTokenPath = "/oauth2/token"

// googleTokenPrefix starts every access token the fake issues.
const googleTokenPrefix = "ya29.fake-"

// DefaultGoogleTokenLifetime is how long the access tokens of the fake's
// token endpoint live unless Options.GoogleTokenLifetime says otherwise:
// an hour, as Google's do.
const DefaultGoogleTokenLifetime = time.Hour

// GoogleToken is an access token the fake issued.
type GoogleToken struct {
	Token          string
	Issued, Expiry time.Time
	// Email is the service account the token was issued to.
	Email string
}

// googleAuth is a fake's Google identity: the service account key it hands
// out and the tokens it issued.
type googleAuth struct {
	once   sync.Once
	key    *rsa.PrivateKey
	keyErr error
	mu     sync.Mutex
	tokens []GoogleToken
}

// googleServiceAccount is the service account the fake's key file names.
const (
	googleServiceAccount = "gateway@fake-project.iam.gserviceaccount.com"
	googleKeyID          = "fake-key-1"
	googleProject        = "fake-project"
)

func (g *googleAuth) privateKey() (*rsa.PrivateKey, error) {
	g.once.Do(func() { g.key, g.keyErr = rsa.GenerateKey(rand.Reader, 2048) })
	return g.key, g.keyErr
}

// GoogleServiceAccount returns a service account key file, as Google's
// console downloads one, whose token_uri is the fake's token endpoint at
// baseURL ("" means the URL Start gave the server). golang.org/x/oauth2/google
// reads it (CredentialsFromJSONWithTypeAndParams with
// google.ServiceAccount) and gets access tokens from the fake, which Vertex
// AI requests must carry until they expire (Options.GoogleTokenLifetime).
func (s *Server) GoogleServiceAccount(baseURL string) []byte {
	if baseURL == "" {
		baseURL = s.URL
	}
	key, err := s.google.privateKey()
	if err != nil {
		panic("providertest: generating the service account key: " + err.Error())
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic("providertest: encoding the service account key: " + err.Error())
	}
	b, _ := json.Marshal(map[string]string{
		"type":                        "service_account",
		"project_id":                  googleProject,
		"private_key_id":              googleKeyID,
		"private_key":                 string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":                googleServiceAccount,
		"client_id":                   "100000000000000000001",
		"auth_uri":                    "https://accounts.google.com/o/oauth2/auth",
		"token_uri":                   strings.TrimSuffix(baseURL, "/") + GoogleTokenPath,
		"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
		"universe_domain":             "googleapis.com",
	})
	return b
}

// GoogleTokens returns every access token the fake's token endpoint issued,
// in order.
func (s *Server) GoogleTokens() []GoogleToken {
	s.google.mu.Lock()
	defer s.google.mu.Unlock()
	return append([]GoogleToken(nil), s.google.tokens...)
}

// googleTokenState says whether an access token is one the fake issued
// and, if so, whether it has expired.
func (s *Server) googleTokenState(tok string) (issued, expired bool) {
	s.google.mu.Lock()
	defer s.google.mu.Unlock()
	for _, t := range s.google.tokens {
		if t.Token == tok {
			return true, !time.Now().Before(t.Expiry)
		}
	}
	return false, false
}

// serveGoogleToken answers the token endpoint: the JWT bearer grant of a
// service account (RFC 7523), as Google's oauth2.googleapis.com/token
// does. The assertion must be an RS256 JWT signed with the key of
// GoogleServiceAccount, naming the service account as iss, the token
// endpoint as aud and a scope, issued now and valid for at most an hour.
// Errors are OAuth's {"error","error_description"} with status 400.
func serveGoogleToken(c *call) {
	form, err := url.ParseQuery(string(c.body))
	if err != nil || !strings.HasPrefix(c.r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		oauthError(c.w, "invalid_request", "the body must be an application/x-www-form-urlencoded form")
		return
	}
	if gt := form.Get("grant_type"); gt != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		oauthError(c.w, "unsupported_grant_type", "Invalid grant_type: "+gt)
		return
	}
	key, err := c.s.google.privateKey()
	if err != nil {
		oauthError(c.w, "invalid_grant", "no key")
		return
	}
	claims, msg := checkJWT(form.Get("assertion"), &key.PublicKey)
	if msg != "" {
		oauthError(c.w, "invalid_grant", msg)
		return
	}
	if claims.Iss != googleServiceAccount {
		oauthError(c.w, "invalid_grant", "Invalid JWT: the issuer is not a known service account.")
		return
	}
	if !strings.HasSuffix(claims.Aud, GoogleTokenPath) {
		oauthError(c.w, "invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim; the audience must be the token endpoint.")
		return
	}
	if claims.Scope == "" {
		oauthError(c.w, "invalid_scope", "Invalid OAuth scope or ID token audience provided.")
		return
	}
	life := c.s.opts.GoogleTokenLifetime
	if life <= 0 {
		life = DefaultGoogleTokenLifetime
	}
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	now := time.Now()
	tok := GoogleToken{Token: googleTokenPrefix + base64.RawURLEncoding.EncodeToString(rnd[:]), Issued: now, Expiry: now.Add(life), Email: claims.Iss}
	c.s.google.mu.Lock()
	c.s.google.tokens = append(c.s.google.tokens, tok)
	c.s.google.mu.Unlock()
	secs := int64(life / time.Second)
	if secs < 1 {
		secs = 1
	}
	b := append([]byte(`{"access_token":`), appendString(nil, tok.Token)...)
	b = append(b, `,"expires_in":`...)
	b = strconv.AppendInt(b, secs, 10)
	b = append(b, `,"token_type":"Bearer"}`...)
	writeJSON(c.w, http.StatusOK, b)
}

// jwtClaims are the claims of a service account's assertion.
type jwtClaims struct {
	Iss, Scope, Aud string
	Iat, Exp        int64
}

// checkJWT verifies an RS256 JWT with pub and returns its claims, or what
// is wrong with it.
func checkJWT(jwt string, pub *rsa.PublicKey) (jwtClaims, string) {
	var claims jwtClaims
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return claims, "Invalid JWT: the assertion is not a JWT."
	}
	var header struct{ Alg, Kid string }
	if h, err := base64.RawURLEncoding.DecodeString(parts[0]); err != nil || json.Unmarshal(h, &header) != nil || header.Alg != "RS256" {
		return claims, "Invalid JWT: the header must name alg RS256."
	}
	if header.Kid != "" && header.Kid != googleKeyID {
		return claims, "Invalid JWT Signature: unknown key id."
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return claims, "Invalid JWT Signature."
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) != nil {
		return claims, "Invalid JWT Signature."
	}
	p, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(p, &claims) != nil {
		return claims, "Invalid JWT: the claims are not JSON."
	}
	now := time.Now().Unix()
	if claims.Iat > now+60 || claims.Exp < now || claims.Exp-claims.Iat > 3600 {
		return claims, "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
	}
	return claims, ""
}

// oauthError writes an OAuth 2.0 error answer of the token endpoint.
func oauthError(w http.ResponseWriter, code, desc string) {
	b := append([]byte(`{"error":`), appendString(nil, code)...)
	b = append(b, `,"error_description":`...)
	b = appendString(b, desc)
	writeJSON(w, http.StatusBadRequest, append(b, '}'))
}
