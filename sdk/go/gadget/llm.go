package gadget

// Completions from the host's LLM (the llm import of gadget:plugin@0.2.0).
// The manifest asks with `[permissions] llm = true`; the operator grants
// models and a per-call budget. The host adds each completion's cost to the
// call's cost, checks the budget before sending, and ends a completion at
// the call's deadline.

import (
	"errors"
	"fmt"

	"wit_component/gadget_plugin_0_3_0_llm"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

// Message is one message of a completion's conversation.
type Message struct {
	// "system", "user" or "assistant".
	Role    string
	Content string
}

// CompletionOptions are a completion's optional settings (zero values: the
// host's defaults).
type CompletionOptions struct {
	// "provider:model", one the operator granted; "": the first granted.
	Model string
	// The answer's token cap; 0: the host's default (1024).
	MaxTokens uint32
	// Sampling temperature; nil: the provider's default.
	Temperature *float32
}

// Completion is the model's answer.
type Completion struct {
	Text         string
	Model        string
	InputTokens  uint64
	OutputTokens uint64
	// USD, already added to the call's cost.
	Cost float64
}

// ErrLLMDeadline is returned when the call's deadline passed (or it was
// cancelled) during a completion; return Cancelled() from Run.
var ErrLLMDeadline = errors.New("the call's deadline passed during a completion")

// Complete asks the host's LLM for one answer to messages.
func Complete(messages []Message, options CompletionOptions) (Completion, error) {
	request := gadget_plugin_0_3_0_llm.CompletionRequest{
		Model:       witTypes.None[string](),
		MaxTokens:   witTypes.None[uint32](),
		Temperature: witTypes.None[float32](),
	}
	for _, m := range messages {
		var role gadget_plugin_0_3_0_llm.Role
		switch m.Role {
		case "system":
			role = gadget_plugin_0_3_0_llm.Role_System
		case "user":
			role = gadget_plugin_0_3_0_llm.Role_User
		case "assistant":
			role = gadget_plugin_0_3_0_llm.Role_Assistant
		default:
			return Completion{}, fmt.Errorf("message role %q is not system, user or assistant", m.Role)
		}
		request.Messages = append(request.Messages, gadget_plugin_0_3_0_llm.Message{Role: role, Content: m.Content})
	}
	if options.Model != "" {
		request.Model = witTypes.Some(options.Model)
	}
	if options.MaxTokens > 0 {
		request.MaxTokens = witTypes.Some(options.MaxTokens)
	}
	if options.Temperature != nil {
		request.Temperature = witTypes.Some(*options.Temperature)
	}
	answer := gadget_plugin_0_3_0_llm.Complete(request)
	if answer.IsErr() {
		e := answer.Err()
		switch e.Tag() {
		case gadget_plugin_0_3_0_llm.LlmError_Denied:
			return Completion{}, fmt.Errorf("LLM denied: %s", e.Denied())
		case gadget_plugin_0_3_0_llm.LlmError_BudgetExceeded:
			return Completion{}, fmt.Errorf("LLM budget exceeded: %s", e.BudgetExceeded())
		case gadget_plugin_0_3_0_llm.LlmError_Provider:
			return Completion{}, fmt.Errorf("LLM provider failed: %s", e.Provider())
		default:
			return Completion{}, ErrLLMDeadline
		}
	}
	c := answer.Ok()
	return Completion{
		Text:         c.Text,
		Model:        c.Model,
		InputTokens:  c.InputTokens,
		OutputTokens: c.OutputTokens,
		Cost:         c.Cost,
	}, nil
}
