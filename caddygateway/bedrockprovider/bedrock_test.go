package bedrockprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy" // http.handlers.reverse_proxy

	"github.com/modelgate/modelgate/caddygateway"
	"github.com/modelgate/modelgate/caddykit"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/bedrock"
	"github.com/modelgate/modelgate/providers/providertest"
)

// TestUnmarshalCaddyfile unmarshals Caddyfile blocks into the provider's
// JSON, or fails with an error of which the case gives a substring after
// "error: ".
func TestUnmarshalCaddyfile(t *testing.T) {
	caddykit.Run(t, func() caddyfile.Unmarshaler { return new(Provider) }, []struct{ Name, In, Want string }{
		{"batch gateway", `bedrock {
			region us-east-1
			batch gateway
		}`, `{"batch":"gateway","region":"us-east-1"}`},
		{"batch twice the wrong way", `bedrock {
			batch native gateway
		}`, `error: wrong argument count`},
		{"batch bucket and role", `bedrock {
			region us-east-1
			batch_bucket s3://mg-batches/modelgate/in/
			batch_role arn:aws:iam::123456789012:role/bedrock-batch
		}`, `{"batch_bucket":"s3://mg-batches/modelgate/in/","batch_role":"arn:aws:iam::123456789012:role/bedrock-batch","region":"us-east-1"}`},
		{"batch bucket from placeholders", `bedrock {
			batch_bucket {env.BUCKET}
			batch_role {env.ROLE}
		}`, `{"batch_bucket":"{env.BUCKET}","batch_role":"{env.ROLE}"}`},
		{"batch bucket without a role", `bedrock {
			batch_bucket s3://mg-batches
		}`, `error: batch_bucket and batch_role together`},
		{"batch bucket not S3", `bedrock {
			batch_bucket gs://mg-batches
			batch_role arn:aws:iam::123456789012:role/r
		}`, `error: not an S3 URI`},
		{"batch bucket name", `bedrock {
			batch_bucket s3://MG_Batches
			batch_role arn:aws:iam::123456789012:role/r
		}`, `error: not an S3 bucket name`},
		{"batch prefix climbing", `bedrock {
			batch_bucket s3://mg-batches/a/../b
			batch_role arn:aws:iam::123456789012:role/r
		}`, `error: key prefix`},
		{"batch role not a role", `bedrock {
			batch_bucket s3://mg-batches
			batch_role arn:aws:iam::123456789012:user/u
		}`, `error: not an IAM role's ARN`},
		{"batch bucket with an API key", `bedrock {
			api_key {env.BEDROCK_KEY}
			batch_bucket s3://mg-batches
			batch_role arn:aws:iam::123456789012:role/r
		}`, `error: S3 takes no Bedrock API key`},
		{"static keys", `bedrock {
			region us-east-1
			access_key_id {env.K}
			secret_access_key {env.S}
			session_token {env.T}
			models anthropic.claude-sonnet-4-5-20250929-v1:0
		}`, `{"models":["anthropic.claude-sonnet-4-5-20250929-v1:0"],"region":"us-east-1","access_key_id":"{env.K}","secret_access_key":"{env.S}","session_token":"{env.T}"}`},
		{"the chain, nothing given", `bedrock`, `{}`},
		{"profile and role", `bedrock {
			profile team
			assume_role arn:aws:iam::123456789012:role/bedrock-caller {
				external_id ext-1
				session_name gw
				duration 1h
			}
		}`, `{"profile":"team","assume_role":{"role_arn":"arn:aws:iam::123456789012:role/bedrock-caller","external_id":"ext-1","session_name":"gw","duration":3600000000000}}`},
		{"role without a block", `bedrock {
			assume_role arn:aws:iam::1:role/r
		}`, `{"assume_role":{"role_arn":"arn:aws:iam::1:role/r"}}`},
		{"api key and options", `bedrock {
			region eu-west-3
			api_key {env.AWS_BEARER_TOKEN_BEDROCK}
			structured_output tool
			base_model arn:aws:bedrock:eu-west-3:1:application-inference-profile/a anthropic.claude-sonnet-4-5-20250929-v1:0
			base_model arn:aws:bedrock:eu-west-3:1:application-inference-profile/b amazon.titan-embed-text-v2:0
			base_url https://vpce-1.bedrock-runtime.eu-west-3.vpce.amazonaws.com
		}`, `{"base_url":"https://vpce-1.bedrock-runtime.eu-west-3.vpce.amazonaws.com","api_key":"{env.AWS_BEARER_TOKEN_BEDROCK}","region":"eu-west-3","structured_output":"tool",` +
			`"base_models":{"arn:aws:bedrock:eu-west-3:1:application-inference-profile/a":"anthropic.claude-sonnet-4-5-20250929-v1:0","arn:aws:bedrock:eu-west-3:1:application-inference-profile/b":"amazon.titan-embed-text-v2:0"}}`},
		{"key id alone", `bedrock {
			access_key_id AKID
		}`, "error: access_key_id and secret_access_key together"},
		{"secret alone", `bedrock {
			secret_access_key s
		}`, "error: access_key_id and secret_access_key together"},
		{"session token alone", `bedrock {
			session_token t
		}`, "error: session_token only with"},
		{"api key and access keys", `bedrock {
			api_key k
			access_key_id a
			secret_access_key s
		}`, "error: not both"},
		{"api key and a role", `bedrock {
			api_key k
			assume_role arn:aws:iam::1:role/r
		}`, "error: not both"},
		{"structured output", `bedrock {
			structured_output json
		}`, `error: structured_output must be native or tool, not "json"`},
		{"base model twice", `bedrock {
			base_model a b
			base_model a c
		}`, "error: given twice"},
		{"base model without a base", `bedrock {
			base_model a
		}`, "error: wrong argument count"},
		{"role without an ARN", `bedrock {
			assume_role
		}`, "error: wrong argument count"},
		{"role option", `bedrock {
			assume_role arn:aws:iam::1:role/r {
				mfa 123456
			}
		}`, `error: unrecognized assume_role option "mfa"`},
		{"role duration", `bedrock {
			assume_role arn:aws:iam::1:role/r {
				duration 5m
			}
		}`, "error: from 15m to 12h"},
		{"region with two values", `bedrock {
			region us-east-1 us-west-2
		}`, "error: wrong argument count"},
		{"unknown option", `bedrock {
			aws_region us-east-1
		}`, `error: unrecognized option "aws_region"`},
	})
}

// cleanAWSEnv empties the environment the AWS chain reads and points HOME
// and the shared files' names at a new directory, so only what a test sets
// is found; it returns HOME.
func cleanAWSEnv(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	for _, k := range []string{
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_ROLE_ARN",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS", bearerTokenEnv,
	} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	// The SDK fixes its default file names from HOME when it starts: name
	// the files under the new HOME instead.
	t.Setenv("HOME", home)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(home, ".aws", "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(home, ".aws", "credentials"))
	return home
}

// Credentials of the fake in these tests.
const (
	keyID  = "AKIDMODULETEST000001"
	secret = "module/test/secret+key/000000000000001"
	token  = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN//test=="
)

// startFake starts a fake Bedrock that checks signatures against key
// ("<id>:<secret>[:<token>]") and takes apiKey as a Bedrock API key.
func startFake(t *testing.T, key, apiKey string) *providertest.Server {
	t.Helper()
	keys := map[string]string{"bedrock": key}
	if apiKey != "" {
		keys["bedrock_api_key"] = apiKey
	}
	return providertest.Start(t, providertest.Options{Keys: keys})
}

// send builds the request the host sends for preq (see
// caddygateway.ProviderBase.upstreamRequest), lets auth authenticate it,
// applies tamper (nil: none), sends it to the fake and returns the status
// and body.
func send(t *testing.T, fake *providertest.Server, auth caddygateway.Authenticator, preq providers.Request, tamper func(*http.Request, *[]byte)) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, fake.URL+preq.Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.RawPath = preq.Path
	req.Host = req.URL.Host
	req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"},
		"Accept-Encoding": {"identity"}, "User-Agent": {"modelgate"}}
	req.ContentLength = int64(len(preq.Body))
	if err := auth.Authenticate(req, preq.Body); err != nil {
		t.Fatal(err)
	}
	body := preq.Body
	if tamper != nil {
		tamper(req, &body)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// chat and embed are translated requests to send.
func chat(t *testing.T, model string) providers.Request {
	t.Helper()
	r, err := bedrock.Chat{}.ChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hello there"}]}`), model)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func embed(t *testing.T, model string) providers.Request {
	t.Helper()
	reqs, err := bedrock.Embeddings{}.EmbeddingsRequests(&providers.EmbeddingsRequest{Texts: []string{"the red fox"}, Dimensions: 256}, model)
	if err != nil {
		t.Fatal(err)
	}
	return reqs[0]
}

func authOf(t *testing.T, p *Provider) (caddygateway.Authenticator, string) {
	t.Helper()
	auth, region, err := p.authenticator(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return auth, region
}

func TestSignerAgainstFake(t *testing.T) {
	cleanAWSEnv(t)
	fake := startFake(t, keyID+":"+secret+":"+token, "")
	auth, region := authOf(t, &Provider{Region: "us-west-2", AccessKeyID: keyID, SecretAccessKey: secret, SessionToken: token})
	if region != "us-west-2" {
		t.Fatalf("region %q", region)
	}
	const model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
	for name, preq := range map[string]providers.Request{"converse": chat(t, model), "invoke": embed(t, "amazon.titan-embed-text-v2:0")} {
		if status, body := send(t, fake, auth, preq, nil); status != 200 {
			t.Fatalf("%s: %d %s", name, status, body)
		}
	}
	last := fake.Requests()[len(fake.Requests())-1]
	authz := last.Header.Get("Authorization")
	if !strings.HasPrefix(authz, "AWS4-HMAC-SHA256 Credential="+keyID+"/") || !strings.Contains(authz, "/us-west-2/bedrock/aws4_request") ||
		!strings.Contains(authz, "SignedHeaders=accept;accept-encoding;content-length;content-type;host;x-amz-date;x-amz-security-token,") ||
		last.Header.Get("X-Amz-Security-Token") != token || last.Header.Get("X-Amz-Content-Sha256") != "" {
		t.Errorf("signed %v", last.Header)
	}

	// Whatever changes after signing is refused: the body, the Host, the
	// path's escaping.
	for name, tamper := range map[string]func(*http.Request, *[]byte){
		"body": func(_ *http.Request, b *[]byte) {
			*b = bytes.Replace(*b, []byte("hello"), []byte("jello"), 1)
		},
		"host":   func(r *http.Request, _ *[]byte) { r.Host = "bedrock-runtime.us-west-2.amazonaws.com" },
		"path":   func(r *http.Request, _ *[]byte) { r.URL.RawPath = strings.Replace(r.URL.RawPath, "%3A", ":", 1) },
		"header": func(r *http.Request, _ *[]byte) { r.Header.Set("Accept", "text/event-stream") },
	} {
		status, body := send(t, fake, auth, chat(t, model), tamper)
		if status != 403 || !strings.Contains(body, "signature") {
			t.Errorf("%s changed after signing: %d %s", name, status, body)
		}
	}

	// Other credentials than the fake's are refused.
	other, _ := authOf(t, &Provider{Region: "us-west-2", AccessKeyID: keyID, SecretAccessKey: "wrong" + secret, SessionToken: token})
	if status, _ := send(t, fake, other, chat(t, model), nil); status != 403 {
		t.Errorf("a wrong secret: %d", status)
	}
}

func TestCredentialChainEnvironment(t *testing.T) {
	cleanAWSEnv(t)
	fake := startFake(t, keyID+":"+secret+":"+token, "")
	t.Setenv("AWS_ACCESS_KEY_ID", keyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_SESSION_TOKEN", token)
	t.Setenv("AWS_REGION", "eu-central-1")
	auth, region := authOf(t, &Provider{})
	if region != "eu-central-1" {
		t.Errorf("region %q, want the environment's", region)
	}
	if status, body := send(t, fake, auth, chat(t, "anthropic.claude-3-haiku-20240307-v1:0"), nil); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	// The configured region wins over the environment's.
	if _, region := authOf(t, &Provider{Region: "ap-northeast-1"}); region != "ap-northeast-1" {
		t.Errorf("region %q", region)
	}
	// Placeholders in the static keys are resolved.
	t.Setenv("MG_TEST_KEY_ID", keyID)
	auth, _ = authOf(t, &Provider{AccessKeyID: "{env.MG_TEST_KEY_ID}", SecretAccessKey: secret, SessionToken: token})
	if status, body := send(t, fake, auth, embed(t, "cohere.embed-v4:0"), nil); status != 200 {
		t.Fatalf("placeholders: %d %s", status, body)
	}
}

func TestCredentialChainSharedFiles(t *testing.T) {
	home := cleanAWSEnv(t)
	dir := filepath.Join(home, ".aws")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("credentials", "[default]\naws_access_key_id = AKIDDEFAULT0000000001\naws_secret_access_key = default/secret\n\n"+
		"[team]\naws_access_key_id = "+keyID+"\naws_secret_access_key = "+secret+"\n")
	write("config", "[default]\nregion = us-east-1\n\n[profile team]\nregion = eu-west-3\n")

	fake := startFake(t, keyID+":"+secret, "")
	auth, region := authOf(t, &Provider{Profile: "team"})
	if region != "eu-west-3" {
		t.Errorf("region %q, want the profile's", region)
	}
	if status, body := send(t, fake, auth, chat(t, "amazon.nova-lite-v1:0"), nil); status != 200 {
		t.Fatalf("profile team: %d %s", status, body)
	}
	// AWS_PROFILE selects it too; without it the default profile signs,
	// whose key the fake does not know.
	t.Setenv("AWS_PROFILE", "team")
	auth, _ = authOf(t, &Provider{})
	if status, body := send(t, fake, auth, chat(t, "amazon.nova-lite-v1:0"), nil); status != 200 {
		t.Fatalf("AWS_PROFILE: %d %s", status, body)
	}
	t.Setenv("AWS_PROFILE", "")
	auth, region = authOf(t, &Provider{})
	if status, _ := send(t, fake, auth, chat(t, "amazon.nova-lite-v1:0"), nil); status != 403 || region != "us-east-1" {
		t.Errorf("default profile: %d, region %q", status, region)
	}
	// A profile that does not exist is a configuration error.
	if _, _, err := (&Provider{Profile: "nobody"}).authenticator(context.Background()); err == nil {
		t.Error("a missing profile was accepted")
	}
}

// credentialServer is a container credentials endpoint (ECS, EKS Pod
// Identity): it counts its answers, each valid for ttl.
type credentialServer struct {
	n   atomic.Int32
	ttl time.Duration
}

func (s *credentialServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "container-auth-token" {
		http.Error(w, "no", http.StatusForbidden)
		return
	}
	s.n.Add(1)
	_ = json.NewEncoder(w).Encode(map[string]string{"AccessKeyId": keyID, "SecretAccessKey": secret, "Token": token,
		"Expiration": time.Now().Add(s.ttl).UTC().Format(time.RFC3339)})
}

func TestCredentialsCachedAndRefreshed(t *testing.T) {
	fake := startFake(t, keyID+":"+secret+":"+token, "")
	for _, tc := range []struct {
		ttl     time.Duration
		fetches int32
	}{
		{time.Hour, 1},        // fetched once, then reused
		{2 * time.Minute, 4},  // within the SDK's 5-minute expiry window: renewed for each request
		{10 * time.Minute, 1}, // outside it: reused
	} {
		cleanAWSEnv(t)
		creds := &credentialServer{ttl: tc.ttl}
		srv := httptest.NewServer(creds)
		t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", srv.URL+"/v2/credentials")
		t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "container-auth-token")
		auth, _ := authOf(t, &Provider{Region: "us-east-1"})
		if n := creds.n.Load(); n != 0 {
			t.Errorf("credentials fetched at provisioning (%d)", n)
		}
		for range 4 {
			if status, body := send(t, fake, auth, chat(t, "m"), nil); status != 200 {
				t.Fatalf("%d %s", status, body)
			}
		}
		if n := creds.n.Load(); n != tc.fetches {
			t.Errorf("credentials valid for %v fetched %d times for 4 requests, want %d", tc.ttl, n, tc.fetches)
		}
		srv.Close()
	}
}

// stsServer answers STS AssumeRole with session credentials, recording the
// requests' forms and Authorization headers.
type stsServer struct {
	n     atomic.Int32
	form  atomic.Value // url.Values
	authz atomic.Value // string
}

func (s *stsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	s.n.Add(1)
	s.form.Store(r.PostForm)
	s.authz.Store(r.Header.Get("Authorization"))
	w.Header().Set("Content-Type", "text/xml")
	_, _ = io.WriteString(w, `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult>`+
		`<Credentials><AccessKeyId>`+keyID+`</AccessKeyId><SecretAccessKey>`+secret+`</SecretAccessKey><SessionToken>`+token+`</SessionToken>`+
		`<Expiration>`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`</Expiration></Credentials>`+
		`<AssumedRoleUser><AssumedRoleId>AROA1:gw</AssumedRoleId><Arn>arn:aws:sts::123456789012:assumed-role/bedrock-caller/gw</Arn></AssumedRoleUser>`+
		`</AssumeRoleResult><ResponseMetadata><RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ResponseMetadata></AssumeRoleResponse>`)
}

func TestAssumeRole(t *testing.T) {
	cleanAWSEnv(t)
	sts := &stsServer{}
	srv := httptest.NewServer(sts)
	defer srv.Close()
	t.Setenv("AWS_ENDPOINT_URL_STS", srv.URL)
	fake := startFake(t, keyID+":"+secret+":"+token, "")
	p := &Provider{Region: "us-east-1", AccessKeyID: "AKIDBASE000000000001", SecretAccessKey: "base/secret",
		AssumeRole: &AssumeRole{RoleARN: "arn:aws:iam::123456789012:role/bedrock-caller", ExternalID: "ext-1", SessionName: "gw",
			Duration: caddy.Duration(time.Hour)}}
	auth, _ := authOf(t, p)
	for range 3 {
		if status, body := send(t, fake, auth, chat(t, "m"), nil); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
	}
	form, _ := sts.form.Load().(url.Values)
	authz, _ := sts.authz.Load().(string)
	if sts.n.Load() != 1 || form.Get("Action") != "AssumeRole" || form.Get("RoleArn") != p.AssumeRole.RoleARN ||
		form.Get("ExternalId") != "ext-1" || form.Get("RoleSessionName") != "gw" || form.Get("DurationSeconds") != "3600" ||
		!strings.Contains(authz, "Credential=AKIDBASE000000000001/") || !strings.Contains(authz, "/us-east-1/sts/") {
		t.Errorf("%d STS calls, last %v signed %q", sts.n.Load(), form, authz)
	}
}

func TestAPIKey(t *testing.T) {
	cleanAWSEnv(t)
	fake := startFake(t, keyID+":"+secret, "ABSKQmVkcm9ja0FQSUtleS1test")
	t.Setenv("MG_BEDROCK_KEY", "ABSKQmVkcm9ja0FQSUtleS1test")
	auth, _ := authOf(t, &Provider{Region: "us-east-1", ProviderBase: caddygateway.ProviderBase{APIKey: "{env.MG_BEDROCK_KEY}"}})
	if status, body := send(t, fake, auth, embed(t, "cohere.embed-v4:0"), nil); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	last := fake.Requests()[len(fake.Requests())-1]
	if last.Header.Get("Authorization") != "Bearer ABSKQmVkcm9ja0FQSUtleS1test" || last.Header.Get("X-Amz-Date") != "" {
		t.Errorf("sent %v", last.Header)
	}

	// From the environment, as the SDK takes it: for the chain, and not
	// over static keys.
	t.Setenv(bearerTokenEnv, "ABSKQmVkcm9ja0FQSUtleS1test")
	auth, _ = authOf(t, &Provider{Region: "us-east-1"})
	if _, ok := auth.(caddygateway.HeaderAuth); !ok {
		t.Errorf("AWS_BEARER_TOKEN_BEDROCK with the chain: %T", auth)
	}
	auth, _ = authOf(t, &Provider{Region: "us-east-1", AccessKeyID: keyID, SecretAccessKey: secret})
	if status, body := send(t, fake, auth, chat(t, "m"), nil); status != 200 {
		t.Fatalf("static keys beside AWS_BEARER_TOKEN_BEDROCK: %d %s", status, body)
	}
	if h := fake.Requests()[len(fake.Requests())-1].Header.Get("Authorization"); !strings.HasPrefix(h, "AWS4-HMAC-SHA256 ") {
		t.Errorf("static keys sent %q", h)
	}
}

func TestAuthenticatorErrors(t *testing.T) {
	cleanAWSEnv(t)
	for _, tc := range []struct {
		name string
		p    Provider
		want string
	}{
		{"no region anywhere", Provider{AccessKeyID: keyID, SecretAccessKey: secret}, "region is required"},
		{"a region that is no name", Provider{Region: "us-east-1.evil.example/x", AccessKeyID: keyID, SecretAccessKey: secret}, "not an AWS region"},
		{"an empty key id", Provider{Region: "us-east-1", AccessKeyID: "{env.MG_UNSET_ID}", SecretAccessKey: secret}, "go together"},
		{"an empty API key", Provider{Region: "us-east-1", ProviderBase: caddygateway.ProviderBase{APIKey: "{env.MG_UNSET_KEY}"}}, "is empty"},
		{"an API key and keys", Provider{Region: "us-east-1", AccessKeyID: keyID, SecretAccessKey: secret, ProviderBase: caddygateway.ProviderBase{APIKey: "k"}}, "not both"},
		{"a role without an ARN", Provider{Region: "us-east-1", AssumeRole: &AssumeRole{RoleARN: "{env.MG_UNSET_ROLE}"}}, "role's ARN"},
	} {
		if _, _, err := tc.p.authenticator(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// No credentials anywhere is no error at provisioning (an instance
	// role may appear), but the first request fails.
	auth, _ := authOf(t, &Provider{Region: "us-east-1"})
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/model/m/converse", nil)
	if err := auth.Authenticate(req, []byte(`{}`)); err == nil || req.Header.Get("Authorization") != "" {
		t.Errorf("signed without credentials: %v", err)
	}
}

func TestProvision(t *testing.T) {
	cleanAWSEnv(t)
	ctx, err := caddy.ProvisionContext(&caddy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{Region: "eu-north-1", AccessKeyID: keyID, SecretAccessKey: secret, StructuredOutput: "tool",
		BaseModels: map[string]string{"arn:x/a": "amazon.titan-embed-text-v2:0"}}
	if err := p.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	e := p.Endpoints()
	if c, ok := e.Chat.(bedrock.Chat); !ok || c.StructuredOutput != "tool" || c.BaseModels["arn:x/a"] == "" {
		t.Errorf("chat %#v", e.Chat)
	}
	if em, ok := e.Embeddings.(bedrock.Embeddings); !ok || em.BaseModels["arn:x/a"] == "" {
		t.Errorf("embeddings %#v", e.Embeddings)
	}
	if err := (&Provider{Region: "us-east-1", AccessKeyID: keyID, SecretAccessKey: secret, StructuredOutput: "json"}).Provision(ctx); err == nil {
		t.Error("structured_output json accepted")
	}
	if err := (&Provider{AccessKeyID: keyID, SecretAccessKey: secret}).Provision(ctx); err == nil || !strings.Contains(err.Error(), "region") {
		t.Errorf("no region: %v", err)
	}
	for region, want := range map[string]string{
		"us-east-1":     "https://bedrock-runtime.us-east-1.amazonaws.com",
		"us-gov-west-1": "https://bedrock-runtime.us-gov-west-1.amazonaws.com",
		"cn-north-1":    "https://bedrock-runtime.cn-north-1.amazonaws.com.cn",
	} {
		if got := endpoint(region); got != want {
			t.Errorf("endpoint(%s) = %s", region, got)
		}
	}
}

// BenchmarkSign is the transport's work for one request: SigV4 over a
// 2 KB body with cached credentials.
func BenchmarkSign(b *testing.B) {
	auth := newSigV4(aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(keyID, secret, token)), "us-east-1")
	body := bytes.Repeat([]byte(`{"text":"0123456789abcdef"}`), 80)
	req, err := http.NewRequest(http.MethodPost, "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse", nil)
	if err != nil {
		b.Fatal(err)
	}
	header := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}, "Accept-Encoding": {"identity"}, "User-Agent": {"modelgate"}}
	req.ContentLength = int64(len(body))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		req.Header = header.Clone()
		if err := auth.Authenticate(req, body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBatchServices: with batch_bucket and batch_role the provider names
// the control plane and the bucket, signed with its credentials for
// bedrock and for s3 (an unsigned payload, so that uploads stream),
// provisions their upstreams and builds batch inference over them
// (caddygateway.NativeBatcher); batch_control_url and batch_storage_url
// replace their URLs. Without a bucket, or with batch gateway, it has no
// batch API, and a bucket or URL the placeholders leave bad is a
// provisioning error.
func TestBatchServices(t *testing.T) {
	cleanAWSEnv(t)
	ctx, err := caddy.ProvisionContext(&caddy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{Region: "eu-west-1", AccessKeyID: keyID, SecretAccessKey: secret,
		BatchBucket: "s3://mg-batches/modelgate", BatchRole: "arn:aws:iam::123456789012:role/bedrock-batch"}
	if err := p.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	control, storage, ok := p.control, p.storage, p.batches != nil
	if !ok || p.BatchMode() != "native" || control.BaseURL != "https://bedrock.eu-west-1.amazonaws.com" || storage.BaseURL != "https://mg-batches.s3.eu-west-1.amazonaws.com" {
		t.Fatalf("services %v: %q, %q", ok, control.BaseURL, storage.BaseURL)
	}
	for _, tc := range []struct {
		pt            caddygateway.ProviderType
		service, hash string
	}{{control, "bedrock", ""}, {storage, "s3", "UNSIGNED-PAYLOAD"}} {
		req := httptest.NewRequest(http.MethodPut, tc.pt.BaseURL+"/x", nil)
		if err := tc.pt.Auth.Authenticate(req, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if a := req.Header.Get("Authorization"); !strings.Contains(a, "/eu-west-1/"+tc.service+"/aws4_request") {
			t.Errorf("%s: Authorization %q", tc.service, a)
		}
		if req.Header.Get("X-Amz-Content-Sha256") != tc.hash {
			t.Errorf("%s: X-Amz-Content-Sha256 %q, want %q", tc.service, req.Header.Get("X-Amz-Content-Sha256"), tc.hash)
		}
	}
	// The control plane's signer passes the fake's check, which
	// recomputes the signature; the bucket's, scoped to s3, does not.
	fake := providertest.Start(t, providertest.Options{Keys: map[string]string{"bedrock_batch": keyID + ":" + secret}})
	job := providers.Request{Path: "/model-invocation-job", Body: []byte(`{"jobName":"mg-1","roleArn":"arn:aws:iam::123456789012:role/bedrock-batch",` +
		`"modelId":"anthropic.claude-haiku-4-5-20251001-v1:0","inputDataConfig":{"s3InputDataConfig":{"s3Uri":"s3://mg-batches/in.jsonl"}},` +
		`"outputDataConfig":{"s3OutputDataConfig":{"s3Uri":"s3://mg-batches/out/"}}}`)}
	if status, body := send(t, fake, control.Auth, job, nil); status != 200 || !strings.Contains(body, "jobArn") {
		t.Errorf("a job created with the control plane's signature: %d %s", status, body)
	}
	if status, body := send(t, fake, storage.Auth, job, nil); status != 403 || !strings.Contains(body, "service") {
		t.Errorf("the bucket's signature on the control plane: %d %s", status, body)
	}

	nowhere := func(context.Context, providers.Request) (providers.Answer, error) { return providers.Answer{}, nil }
	api, ok := p.NativeBatches(nowhere).(bedrock.Batches)
	if !ok || api.Bucket != "mg-batches" || api.Prefix != "modelgate" || api.RoleARN != p.BatchRole || api.Control == nil || api.Storage == nil {
		t.Errorf("api %#v", api)
	}

	// Endpoint overrides, placeholders resolved.
	t.Setenv("MG_TEST_CONTROL", "https://bedrock-fips.eu-west-1.amazonaws.com")
	vpc := &Provider{Region: "eu-west-1", AccessKeyID: keyID, SecretAccessKey: secret,
		BatchBucket: "s3://mg-batches", BatchRole: "arn:aws:iam::123456789012:role/bedrock-batch",
		BatchControlURL: "{env.MG_TEST_CONTROL}", BatchStorageURL: "https://bucket.vpce-0a1b.s3.eu-west-1.vpce.amazonaws.com/mg-batches"}
	if err := vpc.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if vpc.control.BaseURL != "https://bedrock-fips.eu-west-1.amazonaws.com" || vpc.storage.BaseURL != vpc.BatchStorageURL || vpc.NativeBatches(nowhere) == nil {
		t.Errorf("overridden services: %q, %q", vpc.control.BaseURL, vpc.storage.BaseURL)
	}
	for _, bad := range []Provider{
		{BatchControlURL: "{env.MG_TEST_UNSET}"},
		{BatchStorageURL: "ftp://mg-batches.example"},
		{BatchControlURL: "https://bedrock.example?x=1"},
	} {
		bad.Region, bad.AccessKeyID, bad.SecretAccessKey = "eu-west-1", keyID, secret
		bad.BatchBucket, bad.BatchRole = "s3://mg-batches", "arn:aws:iam::123456789012:role/r"
		if err := bad.Provision(ctx); err == nil || !strings.Contains(err.Error(), "batch_") {
			t.Errorf("%q %q: %v", bad.BatchControlURL, bad.BatchStorageURL, err)
		}
	}

	// batch gateway: the bucket's services are not loaded.
	gw := &Provider{Region: "eu-west-1", AccessKeyID: keyID, SecretAccessKey: secret, Batch: "gateway",
		BatchBucket: "s3://mg-batches", BatchRole: "arn:aws:iam::123456789012:role/bedrock-batch"}
	if err := gw.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if gw.BatchMode() != "gateway" || gw.NativeBatches(nowhere) != nil || gw.controlSend != nil {
		t.Error("a provider with batch gateway has a batch API")
	}
	if got := bucketEndpoint("mg.batches", "us-east-1"); got != "https://s3.us-east-1.amazonaws.com/mg.batches" {
		t.Errorf("dotted bucket: %s", got)
	}

	plain := &Provider{Region: "eu-west-1", AccessKeyID: keyID, SecretAccessKey: secret}
	if err := plain.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if plain.batches != nil || plain.BatchMode() != "gateway" || plain.NativeBatches(nowhere) != nil {
		t.Error("a provider without batch_bucket has batch services")
	}
	if err := (&Provider{Region: "eu-west-1", AccessKeyID: keyID, SecretAccessKey: secret, Batch: "native"}).Provision(ctx); err == nil || !strings.Contains(err.Error(), "batch native needs batch_bucket") {
		t.Errorf("batch native without a bucket: %v", err)
	}
	t.Setenv("MG_TEST_BUCKET", "s3://Bad_Bucket")
	bad := &Provider{Region: "eu-west-1", AccessKeyID: keyID, SecretAccessKey: secret, BatchBucket: "{env.MG_TEST_BUCKET}", BatchRole: "arn:aws:iam::123456789012:role/r"}
	if err := bad.Provision(ctx); err == nil || !strings.Contains(err.Error(), "batch_bucket") {
		t.Errorf("a bad bucket from a placeholder: %v", err)
	}
}
