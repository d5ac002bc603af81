package bedrockprovider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/caddyserver/caddy/v2"

	"github.com/modelgate/modelgate/caddygateway"
)

// signingName is SigV4's service name for the Bedrock runtime, as
// aws-sdk-go-v2's service/bedrockruntime signs its requests.
const signingName = "bedrock"

// bearerTokenEnv is where the AWS SDKs take a Bedrock API key from: with it
// set, service/bedrockruntime sends "Authorization: Bearer <key>" instead
// of signing (its resolveEnvBearerToken).
const bearerTokenEnv = "AWS_BEARER_TOKEN_BEDROCK"

// credentialTimeout bounds one fetch of credentials from the chain (an
// instance role, a container endpoint, STS).
const credentialTimeout = 30 * time.Second

// sigV4 signs each request with AWS Signature Version 4, as the SDK signs
// Bedrock's: over the method, the escaped path, the query, the Host and the
// other headers the request carries (Content-Type, Content-Length, Accept,
// X-Amz-Date, X-Amz-Security-Token) and the SHA-256 of the body the
// transport hands it. Bedrock's SDK client sends no X-Amz-Content-Sha256
// header (service/bedrockruntime computes the payload hash but adds no
// ContentSHA256Header middleware), and neither does this. Credentials come
// from creds, an aws.CredentialsCache: fetched once, and again only as they
// near their expiry, never for each request.
//
// For S3 (forS3) it signs as S3's SDK does over a body it does not hash:
// X-Amz-Content-Sha256 UNSIGNED-PAYLOAD, so that a batch's records stream
// to the bucket without being read twice.
type sigV4 struct {
	creds  aws.CredentialsProvider
	region string
	signer *v4.Signer
	now    func() time.Time
	// service is the signing name; unsigned: the payload is not hashed.
	service  string
	unsigned bool
}

func newSigV4(creds aws.CredentialsProvider, region string) *sigV4 {
	return &sigV4{creds: creds, region: region, signer: v4.NewSigner(), now: time.Now, service: signingName}
}

// forS3 is the signer of S3 requests with the same credentials.
func (s *sigV4) forS3() *sigV4 {
	c := *s
	c.service, c.unsigned = "s3", true
	return &c
}

// Authenticate signs req, whose body is body.
func (s *sigV4) Authenticate(req *http.Request, body []byte) error {
	// A refresh is shared by the requests waiting on it: one client that
	// goes away must not fail it for the others.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), credentialTimeout)
	defer cancel()
	creds, err := s.creds.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("getting AWS credentials: %w", err)
	}
	req.Header.Del("Authorization")
	req.Header.Del("X-Amz-Security-Token")
	if s.unsigned {
		req.Header.Set("X-Amz-Content-Sha256", unsignedPayload)
		return s.signer.SignHTTP(ctx, creds, req, unsignedPayload, s.service, s.region, s.now().UTC())
	}
	sum := sha256.Sum256(body)
	return s.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), s.service, s.region, s.now().UTC())
}

// resolved is the provider's configuration with its placeholders resolved.
type resolved struct {
	region, apiKey, profile     string
	keyID, secret, token        string
	roleARN, externalID, roleAs string
	roleDuration                time.Duration
}

func (p *Provider) resolve() resolved {
	repl := caddy.NewReplacer()
	get := func(s string) string { return repl.ReplaceKnown(s, "") }
	r := resolved{
		region: get(p.Region), apiKey: p.Key(), profile: get(p.Profile),
		keyID: get(p.AccessKeyID), secret: get(p.SecretAccessKey), token: get(p.SessionToken),
	}
	if a := p.AssumeRole; a != nil {
		r.roleARN, r.externalID, r.roleAs, r.roleDuration = get(a.RoleARN), get(a.ExternalID), get(a.SessionName), time.Duration(a.Duration)
	}
	return r
}

// authenticator builds how the gateway authenticates to Bedrock and finds
// the region:
//
//   - api_key: a Bedrock API key, sent as "Authorization: Bearer <key>";
//   - access_key_id and secret_access_key (and session_token): static
//     credentials, signed with;
//   - otherwise the standard AWS chain of aws-sdk-go-v2's config
//     (LoadDefaultConfig): the environment (AWS_ACCESS_KEY_ID, …), the
//     shared config and credentials files and their profile (profile, else
//     AWS_PROFILE), SSO, web identity, the ECS/EKS container endpoint and
//     the EC2 instance role. As the SDK does, AWS_BEARER_TOKEN_BEDROCK in
//     the environment selects a Bedrock API key instead.
//
// assume_role then assumes a role through STS with those credentials. The
// region is region, else the chain's (AWS_REGION, AWS_DEFAULT_REGION, the
// profile's region). The chain is read here, at provisioning, but no
// credentials are fetched until the first request.
func (p *Provider) authenticator(ctx context.Context) (caddygateway.Authenticator, string, error) {
	r := p.resolve()
	static := r.keyID != "" || r.secret != ""
	switch {
	case p.APIKey != "" && (p.AccessKeyID != "" || p.SecretAccessKey != "" || p.Profile != "" || p.AssumeRole != nil):
		return nil, "", errors.New("give api_key or AWS credentials (access keys, profile, assume_role), not both")
	case p.APIKey != "" && r.apiKey == "":
		return nil, "", fmt.Errorf("api_key %s is empty (is the environment variable set?)", p.APIKey)
	case static && (r.keyID == "" || r.secret == ""):
		return nil, "", errors.New("access_key_id and secret_access_key go together (is an environment variable unset?)")
	case p.AssumeRole != nil && r.roleARN == "":
		return nil, "", errors.New("assume_role needs the role's ARN")
	}

	bearer := r.apiKey
	needChain := r.region == "" || (bearer == "" && !static) || p.AssumeRole != nil
	var cfg aws.Config
	if needChain {
		opts := []func(*config.LoadOptions) error{config.WithRegion(r.region)}
		if r.profile != "" {
			opts = append(opts, config.WithSharedConfigProfile(r.profile))
		}
		if static {
			opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(r.keyID, r.secret, r.token)))
		}
		var err error
		// The chain's providers keep this context for their later
		// fetches: it must outlive provisioning.
		if cfg, err = config.LoadDefaultConfig(context.WithoutCancel(ctx), opts...); err != nil {
			return nil, "", fmt.Errorf("loading the AWS configuration: %w", err)
		}
		if bearer == "" && !static && p.Profile == "" && p.AssumeRole == nil {
			bearer = os.Getenv(bearerTokenEnv)
		}
	}
	region := r.region
	if region == "" {
		region = cfg.Region
	}
	if region == "" {
		return nil, "", errors.New("region is required: set region, or AWS_REGION, or a region in the AWS profile")
	}
	if !validRegion(region) {
		return nil, "", fmt.Errorf("region %q is not an AWS region name", region)
	}
	if bearer != "" {
		return caddygateway.HeaderAuth{Header: "Authorization", Value: "Bearer " + bearer}, region, nil
	}

	var creds aws.CredentialsProvider
	if static && !needChain {
		creds = credentials.NewStaticCredentialsProvider(r.keyID, r.secret, r.token)
	} else {
		creds = cfg.Credentials // an aws.CredentialsCache over the chain
	}
	if p.AssumeRole != nil {
		cfg.Region = region
		cfg.Credentials = creds
		roleAs := r.roleAs
		if roleAs == "" {
			roleAs = "modelgate"
		}
		provider := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), r.roleARN, func(o *stscreds.AssumeRoleOptions) {
			o.RoleSessionName = roleAs
			if r.externalID != "" {
				o.ExternalID = aws.String(r.externalID)
			}
			if r.roleDuration > 0 {
				o.Duration = r.roleDuration
			}
		})
		creds = aws.NewCredentialsCache(provider, func(o *aws.CredentialsCacheOptions) {
			o.ExpiryWindow = 5 * time.Minute
		})
	}
	if creds == nil {
		return nil, "", errors.New("the AWS configuration has no credentials")
	}
	return newSigV4(creds, region), region, nil
}

// validRegion reports whether s reads as an AWS region name
// (us-east-1, eu-central-2, us-gov-west-1, cn-north-1): it goes into the
// endpoint's host name.
func validRegion(s string) bool {
	if s == "" || len(s) > 32 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// unsignedPayload is SigV4's payload hash for a body that is not hashed.
const unsignedPayload = "UNSIGNED-PAYLOAD"

// endpoint is Bedrock's runtime endpoint in region.
func endpoint(region string) string { return "https://bedrock-runtime." + region + domain(region) }

// controlEndpoint is Bedrock's control plane in region, which serves the
// model invocation jobs.
func controlEndpoint(region string) string { return "https://bedrock." + region + domain(region) }

// bucketEndpoint is the S3 endpoint of bucket in region under which
// "/{key}" names an object: virtual-hosted, or path-style for a bucket
// whose name has a dot (which a virtual host's TLS certificate does not
// cover).
func bucketEndpoint(bucket, region string) string {
	if strings.Contains(bucket, ".") {
		return "https://s3." + region + domain(region) + "/" + bucket
	}
	return "https://" + bucket + ".s3." + region + domain(region)
}

// domain is AWS's domain in region.
func domain(region string) string {
	if len(region) > 3 && region[:3] == "cn-" {
		return ".amazonaws.com.cn"
	}
	return ".amazonaws.com"
}
