package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/server"
)

const (
	// podIdentitySource is the Source of EKS Pod Identity credentials.
	podIdentitySource = "keymount-podidentity"
	// DefaultPodIdentityTimeout bounds one request to one agent endpoint
	// when Config.PodIdentityTimeout is not set.
	DefaultPodIdentityTimeout = 10 * time.Second
	// maxAgentResponse bounds how much of an agent response is read.
	maxAgentResponse = 64 << 10
	// maxAgentMessage bounds the agent message quoted in an error.
	maxAgentMessage = 256
)

// AgentError is a non-200 answer of the EKS Pod Identity agent. It matches
// ErrAgent.
type AgentError struct {
	Endpoint   string
	StatusCode int
	// Message is the agent's explanation, with the token redacted.
	Message string
}

func (e *AgentError) Error() string {
	return fmt.Sprintf("eks pod identity agent at %s: HTTP %d: %s", e.Endpoint, e.StatusCode, e.Message)
}

// Is makes errors.Is(err, ErrAgent) true.
func (e *AgentError) Is(target error) bool { return target == ErrAgent }

// Unwrap is the provider kit's sentinel of the answer: an agent that
// refuses the token (4xx other than 429) denies the identity; one that is
// overloaded or failing may answer a retry.
func (e *AgentError) Unwrap() error {
	if e.StatusCode >= 400 && e.StatusCode < 500 && e.StatusCode != http.StatusTooManyRequests {
		return server.ErrPermissionDenied
	}
	return server.ErrUnavailable
}

// agentCredentials is the agent's answer (the container credentials format).
type agentCredentials struct {
	AccessKeyID     string    `json:"AccessKeyId"`
	SecretAccessKey string    `json:"SecretAccessKey"`
	Token           string    `json:"Token"`
	AccountID       string    `json:"AccountId"`
	Expiration      time.Time `json:"Expiration"`
}

// podIdentity asks the node's Pod Identity agent for the credentials of the
// pod's service account.
func (r *Resolver) podIdentity(ctx context.Context, s *spec.Spec) (*Identity, error) {
	tok, err := token(s, AudiencePodIdentity)
	if err != nil {
		return nil, err
	}
	endpoints, err := r.agentEndpoints(s.AddressType)
	if err != nil {
		return nil, err
	}
	// The agent's credentials carry the pod in their session tags
	// (kubernetes-pod-name, kubernetes-pod-uid), which IAM policies may
	// test: they are never served to another pod, even of the same
	// service account.
	key := "podidentity:" + s.Namespace + "/" + s.ServiceAccount + "/" + s.PodName + "/" + s.PodUID
	creds, err := r.cache.get(ctx, key, func(ctx context.Context) (aws.Credentials, error) {
		return r.askAgents(ctx, endpoints, tok)
	})
	if err != nil {
		return nil, fmt.Errorf("eks pod identity credentials of service account %s/%s: %w",
			s.Namespace, s.ServiceAccount, err)
	}
	return &Identity{Key: key, Credentials: provider{creds: creds}}, nil
}

// agentEndpoints lists the agent URLs to try, in order.
func (r *Resolver) agentEndpoints(t spec.AddressType) ([]string, error) {
	switch t {
	case spec.AddressIPv4:
		return []string{r.cfg.PodIdentityEndpointIPv4}, nil
	case spec.AddressIPv6:
		return []string{r.cfg.PodIdentityEndpointIPv6}, nil
	case spec.AddressAuto, "":
		return []string{r.cfg.PodIdentityEndpointIPv4, r.cfg.PodIdentityEndpointIPv6}, nil
	default:
		return nil, fmt.Errorf("%w: unknown pod identity address type %q (want %s, %s or %s)",
			server.ErrInvalidParameters, t, spec.AddressIPv4, spec.AddressIPv6, spec.AddressAuto)
	}
}

// askAgents tries each endpoint in turn. An agent that answers 4xx has
// refused the token, and the next endpoint would refuse it too.
func (r *Resolver) askAgents(ctx context.Context, endpoints []string, tok string) (_ aws.Credentials, err error) {
	defer func(start time.Time) { r.observe(SourcePodIdentity, err, start) }(time.Now())
	var errs []error
	for _, ep := range endpoints {
		creds, err := r.askAgent(ctx, ep, tok)
		if err == nil {
			return creds, nil
		}
		errs = append(errs, err)
		var agentErr *AgentError
		if errors.As(err, &agentErr) && agentErr.StatusCode < http.StatusInternalServerError {
			break
		}
	}
	return aws.Credentials{}, errors.Join(errs...)
}

// askAgent GETs the credentials from one agent endpoint.
func (r *Resolver) askAgent(ctx context.Context, endpoint, tok string) (aws.Credentials, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.PodIdentityTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, http.NoBody)
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("eks pod identity agent endpoint %q: %w", endpoint, server.Mark(err, server.ErrFailedPrecondition))
	}
	req.Header.Set("Authorization", tok)
	req.Header.Set("Accept", "application/json")
	resp, err := r.agentHTTP.Do(req)
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("calling the eks pod identity agent: %w", server.Mark(redact(err, tok), server.ErrUnavailable))
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAgentResponse))
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("reading the eks pod identity agent's answer at %s: %w", endpoint, server.Mark(err, server.ErrUnavailable))
	}
	if resp.StatusCode != http.StatusOK {
		return aws.Credentials{}, &AgentError{
			Endpoint:   endpoint,
			StatusCode: resp.StatusCode,
			Message:    agentMessage(body, tok),
		}
	}
	return parseAgentCredentials(body, endpoint)
}

// parseAgentCredentials decodes a 200 answer. Errors never quote the body.
func parseAgentCredentials(body []byte, endpoint string) (aws.Credentials, error) {
	var c agentCredentials
	if err := json.Unmarshal(body, &c); err != nil {
		return aws.Credentials{}, fmt.Errorf("%w: malformed answer at %s (%d bytes)", ErrAgent, endpoint, len(body))
	}
	if c.AccessKeyID == "" || c.SecretAccessKey == "" || c.Expiration.IsZero() {
		return aws.Credentials{}, fmt.Errorf("%w: answer at %s lacks AccessKeyId, SecretAccessKey or Expiration",
			ErrAgent, endpoint)
	}
	return aws.Credentials{
		AccessKeyID:     c.AccessKeyID,
		SecretAccessKey: c.SecretAccessKey,
		SessionToken:    c.Token,
		Source:          podIdentitySource,
		CanExpire:       true,
		Expires:         c.Expiration,
		AccountID:       c.AccountID,
	}, nil
}

// agentMessage extracts the agent's explanation from an error answer: the
// "message" of a JSON body, else the body itself, shortened and with the
// token redacted.
func agentMessage(body []byte, tok string) string {
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		msg = e.Message
		if e.Code != "" {
			msg = e.Code + ": " + msg
		}
	}
	if tok != "" {
		msg = strings.ReplaceAll(msg, tok, "<redacted>")
	}
	if len(msg) > maxAgentMessage {
		msg = msg[:maxAgentMessage] + "..."
	}
	if msg == "" {
		msg = "(no message)"
	}
	return msg
}
