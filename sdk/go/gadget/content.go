package gadget

// Contract 0.3.0 for a call: a result's parts, numeric progress, and
// questions whose answers the running gadget gets (ask and carry on).

import (
	"encoding/json"
	"errors"
	"fmt"

	"wit_component/gadget_plugin_0_3_0_ask"
	"wit_component/gadget_plugin_0_3_0_host"
	"wit_component/gadget_plugin_0_3_0_llm"
	"wit_component/gadget_plugin_0_3_0_types"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

// Part is one part of a result after its text: TextPart, Image, Audio,
// EmbeddedText, EmbeddedBlob or Link.
type Part struct {
	content gadget_plugin_0_3_0_types.Content
}

// TextPart is more text, as a part of its own.
func TextPart(text string) Part { return Part{gadget_plugin_0_3_0_types.MakeContentText(text)} }

// Image is an image's bytes with their MIME type (such as "image/png").
func Image(mimeType string, data []byte) Part {
	return Part{gadget_plugin_0_3_0_types.MakeContentImage(gadget_plugin_0_3_0_types.Media{MimeType: mimeType, Data: data})}
}

// Audio is a sound's bytes with their MIME type (such as "audio/wav").
func Audio(mimeType string, data []byte) Part {
	return Part{gadget_plugin_0_3_0_types.MakeContentAudio(gadget_plugin_0_3_0_types.Media{MimeType: mimeType, Data: data})}
}

func contents(uri, mimeType string, body gadget_plugin_0_3_0_types.ResourceBody) gadget_plugin_0_3_0_types.ResourceContents {
	return gadget_plugin_0_3_0_types.ResourceContents{Uri: uri, MimeType: option(mimeType), Body: body}
}

// EmbeddedText is a resource's text, embedded ("" mimeType: none).
func EmbeddedText(uri, mimeType, text string) Part {
	return Part{gadget_plugin_0_3_0_types.MakeContentResource(contents(uri, mimeType, gadget_plugin_0_3_0_types.MakeResourceBodyText(text)))}
}

// EmbeddedBlob is a resource's bytes, embedded ("" mimeType: none).
func EmbeddedBlob(uri, mimeType string, data []byte) Part {
	return Part{gadget_plugin_0_3_0_types.MakeContentResource(contents(uri, mimeType, gadget_plugin_0_3_0_types.MakeResourceBodyBlob(data)))}
}

// Link points at a resource the client may read ("" mimeType: none).
func Link(uri, name, mimeType string) Part {
	return Part{gadget_plugin_0_3_0_types.MakeContentResourceLink(gadget_plugin_0_3_0_types.ResourceLink{
		Uri: uri, Name: name, Title: witTypes.None[string](), Description: witTypes.None[string](), MimeType: option(mimeType),
	})}
}

// resultContents is a result's content: its text (when not empty), then its parts.
func resultContents(text string, parts []Part) []gadget_plugin_0_3_0_types.Content {
	out := make([]gadget_plugin_0_3_0_types.Content, 0, len(parts)+1)
	if text != "" {
		out = append(out, gadget_plugin_0_3_0_types.MakeContentText(text))
	}
	for _, part := range parts {
		out = append(out, part.content)
	}
	return out
}

// ReportProgress is progress as numbers: done so far, of total (negative:
// unknown), with a message ("" for none). Each report must be more than the
// last; the host drops one that is not.
func (c *Context) ReportProgress(done, total float64, message string) {
	totalOption := witTypes.None[float64]()
	if total >= 0 {
		totalOption = witTypes.Some(total)
	}
	gadget_plugin_0_3_0_host.ReportProgress(done, totalOption, option(message))
}

// Question is one question of an ask, under its key: TextQuestion,
// FormQuestion, SampleQuestion or RootsQuestion.
type Question struct {
	request gadget_plugin_0_3_0_ask.InputRequest
}

// TextQuestion is a question answered in words.
func TextQuestion(key, text string) Question {
	return Question{gadget_plugin_0_3_0_ask.InputRequest{Key: key, Question: gadget_plugin_0_3_0_ask.MakeQuestionText(text)}}
}

// FormQuestion is a form: a message and the JSON Schema of the answer
// object (string, number, integer and boolean properties).
func FormQuestion(key, message, schema string) Question {
	return Question{gadget_plugin_0_3_0_ask.InputRequest{Key: key, Question: gadget_plugin_0_3_0_ask.MakeQuestionForm(
		gadget_plugin_0_3_0_ask.Form{Message: message, Schema: schema})}}
}

// SampleQuestion asks the client's model (MCP sampling): the user's text,
// an optional system prompt ("" for none), a token cap (0: 1000).
func SampleQuestion(key, user, system string, maxTokens uint32) Question {
	if maxTokens == 0 {
		maxTokens = 1000
	}
	messages := []gadget_plugin_0_3_0_ask.Message{{Role: gadget_plugin_0_3_0_llm.Role_User, Content: user}}
	return Question{gadget_plugin_0_3_0_ask.InputRequest{Key: key, Question: gadget_plugin_0_3_0_ask.MakeQuestionSample(
		gadget_plugin_0_3_0_ask.Sample{Messages: messages, SystemPrompt: option(system), MaxTokens: maxTokens})}}
}

// RootsQuestion asks for the client's roots.
func RootsQuestion(key string) Question {
	return Question{gadget_plugin_0_3_0_ask.InputRequest{Key: key, Question: gadget_plugin_0_3_0_ask.MakeQuestionRoots()}}
}

// Root is a directory or file the client works in.
type Root struct {
	URI  string
	Name string
}

// Answer is one answer. Declined and Cancelled say the person gave none.
type Answer struct {
	Text      string         // a text question's words, a sample's text
	Form      map[string]any // a form's object
	Roots     []Root
	Declined  bool
	Cancelled bool
}

// Answers are the answers of one ask, by key.
type Answers map[string]Answer

// AskError says why no answers came: Unavailable (nobody here can answer;
// Message says what would), Timeout, or Invalid (Message says which
// question). A cancellation is ErrCancelled instead.
type AskError struct {
	Kind    string // "unavailable", "timeout" or "invalid"
	Message string
}

func (e *AskError) Error() string {
	if e.Message == "" {
		return e.Kind
	}
	return e.Kind + ": " + e.Message
}

// Kinds says which kinds of question this call can have answered.
type Kinds struct{ Text, Form, Sample, Roots bool }

// Answerable is what this call can have answered: a gadget can ask only
// that, or do without.
func (c *Context) Answerable() Kinds {
	kinds := gadget_plugin_0_3_0_ask.Answerable()
	return Kinds{
		Text:   kinds&gadget_plugin_0_3_0_ask.Kinds_Text != 0,
		Form:   kinds&gadget_plugin_0_3_0_ask.Kinds_Form != 0,
		Sample: kinds&gadget_plugin_0_3_0_ask.Kinds_Sample != 0,
		Roots:  kinds&gadget_plugin_0_3_0_ask.Kinds_Roots != 0,
	}
}

// Ask asks every question at once and waits for the answers (waiting does
// not count against the deadline). Ask before acting, and the same
// questions in the same order for the same parameters: over stateless HTTP
// the host runs the gadget again and answers its earlier asks from the
// recorded answers. On cancellation the error is ErrCancelled: return it.
func (c *Context) Ask(questions ...Question) (Answers, error) {
	return ask(questions)
}

// AskText asks one text question; a declined or dismissed question is an
// error.
func (c *Context) AskText(question string) (string, error) { return askText(question) }

func askText(question string) (string, error) {
	answers, err := ask([]Question{TextQuestion("answer", question)})
	if err != nil {
		return "", err
	}
	answer := answers["answer"]
	if answer.Declined || answer.Cancelled {
		return "", errors.New("the person declined to answer")
	}
	return answer.Text, nil
}

func ask(questions []Question) (Answers, error) {
	requests := make([]gadget_plugin_0_3_0_ask.InputRequest, len(questions))
	for i, q := range questions {
		requests[i] = q.request
	}
	result := gadget_plugin_0_3_0_ask.Ask(requests)
	if result.Tag() == witTypes.ResultErr {
		failure := result.Err()
		switch failure.Tag() {
		case gadget_plugin_0_3_0_ask.AskError_Unavailable:
			return nil, &AskError{Kind: "unavailable", Message: failure.Unavailable()}
		case gadget_plugin_0_3_0_ask.AskError_Invalid:
			return nil, &AskError{Kind: "invalid", Message: failure.Invalid()}
		case gadget_plugin_0_3_0_ask.AskError_Timeout:
			return nil, &AskError{Kind: "timeout"}
		default:
			return nil, ErrCancelled
		}
	}
	got := result.Ok()
	answers := make(Answers, len(questions))
	for i, q := range questions {
		if i >= len(got) {
			answers[q.request.Key] = Answer{Cancelled: true}
			continue
		}
		answer, err := fromAnswer(got[i])
		if err != nil {
			return nil, fmt.Errorf("answer %q: %w", q.request.Key, err)
		}
		answers[q.request.Key] = answer
	}
	return answers, nil
}

func fromAnswer(in gadget_plugin_0_3_0_ask.Answer) (Answer, error) {
	switch in.Tag() {
	case gadget_plugin_0_3_0_ask.Answer_Text:
		return Answer{Text: in.Text()}, nil
	case gadget_plugin_0_3_0_ask.Answer_Sample:
		return Answer{Text: in.Sample()}, nil
	case gadget_plugin_0_3_0_ask.Answer_Form:
		var form map[string]any
		if err := json.Unmarshal([]byte(in.Form()), &form); err != nil {
			return Answer{}, err
		}
		return Answer{Form: form}, nil
	case gadget_plugin_0_3_0_ask.Answer_Roots:
		var roots []Root
		for _, root := range in.Roots() {
			name := ""
			if root.Name.Tag() == witTypes.OptionSome {
				name = root.Name.Some()
			}
			roots = append(roots, Root{URI: root.Uri, Name: name})
		}
		return Answer{Roots: roots}, nil
	case gadget_plugin_0_3_0_ask.Answer_Declined:
		return Answer{Declined: true}, nil
	default:
		return Answer{Cancelled: true}, nil
	}
}
