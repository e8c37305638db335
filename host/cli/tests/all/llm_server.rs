//! A scripted LLM server on 127.0.0.1 for the agent, llm and MCP tests:
//! OpenAI- and Anthropic-compatible, answering with chunked server-sent
//! events at the pace a test chooses and recording every request.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

/// One scripted reply.
pub(crate) enum Reply {
    /// Server-sent events, each after its delay; `broken` closes the
    /// connection after them without ending the body.
    Events {
        events: Vec<(Duration, String)>,
        broken: bool,
    },
    /// A plain response with a status and extra headers.
    Status {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) path: String,
    headers: Vec<(String, String)>,
    pub(crate) body: Value,
}

impl Received {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The server: replies in order, one connection per request; when the
/// script runs out it answers 500 (a test that asks for more than it
/// scripted fails visibly). Stops with the test process.
pub(crate) struct LlmServer {
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
}

impl LlmServer {
    /// A server that is not there: `port` has nothing listening.
    pub(crate) fn nowhere(port: u16) -> LlmServer {
        LlmServer {
            port,
            received: Arc::default(),
        }
    }

    pub(crate) fn start(script: Vec<Reply>) -> LlmServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let received: Arc<Mutex<Vec<Received>>> = Arc::default();
        let log = received.clone();
        std::thread::spawn(move || {
            let mut script = script.into_iter();
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { break };
                let Some(request) = read_request(&mut stream) else {
                    continue;
                };
                log.lock().unwrap().push(request);
                let reply = script.next().unwrap_or(Reply::Status {
                    status: 500,
                    headers: vec![],
                    body: r#"{"error":{"message":"the test scripted no more replies"}}"#.into(),
                });
                let _ = answer(&mut stream, reply);
            }
        });
        LlmServer { port, received }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

fn read_request(stream: &mut TcpStream) -> Option<Received> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Received {
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    })
}

fn answer(stream: &mut TcpStream, reply: Reply) -> std::io::Result<()> {
    match reply {
        Reply::Status {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} Scripted\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            stream.write_all(format!("{head}\r\n{body}").as_bytes())
        }
        Reply::Events { events, broken } => {
            stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
            )?;
            for (delay, event) in events {
                std::thread::sleep(delay);
                stream.write_all(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes())?;
                stream.flush()?;
            }
            if !broken {
                stream.write_all(b"0\r\n\r\n")?;
            }
            stream.flush()
        }
    }
}

/// An OpenAI stream of `pieces` (text, delay before it), then usage and
/// `[DONE]`.
pub(crate) fn openai_reply(pieces: &[(&str, u64)], usage: (u64, u64)) -> Reply {
    let mut events: Vec<(Duration, String)> = pieces
        .iter()
        .map(|(text, delay)| {
            let chunk = json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
            (Duration::from_millis(*delay), format!("data: {chunk}\n\n"))
        })
        .collect();
    let finish = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    let usage =
        json!({"choices": [], "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1}});
    events.push((Duration::ZERO, format!("data: {finish}\n\n")));
    events.push((Duration::ZERO, format!("data: {usage}\n\ndata: [DONE]\n\n")));
    Reply::Events {
        events,
        broken: false,
    }
}

/// One block of the format.
pub(crate) fn block(header: &str, args: &[(&str, &str)]) -> String {
    let mut text = format!("\n!!!GADGET_START:{header}\n");
    for (pointer, value) in args {
        text.push_str(&format!("!!!ARG:{pointer}\n{value}\n"));
    }
    text.push_str("!!!GADGET_END\n");
    text
}

/// An Anthropic message: `message_start`, the content block events given
/// (each named by its own `type`), then `message_delta` with
/// `stop_reason` and `message_stop`.
pub(crate) fn anthropic_reply(content: Vec<Value>, stop_reason: &str) -> Reply {
    let event = |data: Value| {
        let name = data["type"].as_str().unwrap_or_default().to_string();
        (Duration::ZERO, format!("event: {name}\ndata: {data}\n\n"))
    };
    let mut events = vec![event(
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 60, "output_tokens": 1}}}),
    )];
    events.extend(content.into_iter().map(event));
    events.push(event(json!({"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": {"output_tokens": 5}})));
    events.push(event(json!({"type": "message_stop"})));
    Reply::Events {
        events,
        broken: false,
    }
}
