use super::*;
use tower::ServiceExt as _;

/// The guard in front of a handler that says it was reached.
fn guarded(draining: bool) -> axum::Router {
    let metrics = Arc::new(Metrics::new());
    let shared = Arc::new(Shared {
        metrics: metrics.clone(),
        server: GadgetServer::new(Arc::new(gadget_core::tool::Toolbox::new()), metrics),
        calls: Arc::new(Semaphore::new(1)),
        auth: Arc::new(crate::auth::Auth::Open),
        draining: AtomicBool::new(draining),
        hosts: AllowedHosts::new(&[]),
        state: None,
    });
    axum::Router::new()
        .route("/mcp", axum::routing::post(|| async { "reached" }))
        .layer(axum::middleware::from_fn_with_state(shared, guard))
}

fn post(body: impl Into<Body>) -> Request {
    Request::post("/mcp").body(body.into()).unwrap()
}

/// Reads until the peer closes the connection or `within` passes;
/// whether it closed, and what it sent.
async fn closed_within(stream: &mut tokio::net::TcpStream, within: Duration) -> (bool, String) {
    use tokio::io::AsyncReadExt as _;
    let mut seen = Vec::new();
    let read = tokio::time::timeout(within, stream.read_to_end(&mut seen)).await;
    (read.is_ok(), String::from_utf8_lossy(&seen).into_owned())
}

#[tokio::test]
async fn slow_or_surplus_connections_are_closed_and_good_ones_served() {
    use tokio::io::AsyncWriteExt as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = ConnectionLimits {
        header_read_timeout: Duration::from_millis(300),
        max_open: 2,
    };
    let router = axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok\n" }));
    let stop = CancellationToken::new();
    let server = tokio::spawn(accept_until(
        listener,
        router,
        limits,
        stop.clone().cancelled_owned(),
    ));

    // Two clients trickle a header a byte at a time, for longer than the
    // header timeout: both are cut off, although each keeps sending.
    let mut tricklers = Vec::new();
    for _ in 0..2 {
        tricklers.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    let started = std::time::Instant::now();
    // A third connection while both slots are held is closed at once.
    let mut surplus = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (closed, _) = closed_within(&mut surplus, Duration::from_secs(5)).await;
    assert!(closed, "a connection over the cap must be closed");
    let header = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    'trickle: for byte in header {
        for stream in &mut tricklers {
            if stream.write_all(&[*byte]).await.is_err() {
                break 'trickle;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for stream in &mut tricklers {
        let (closed, answer) = closed_within(stream, Duration::from_secs(5)).await;
        assert!(closed, "a trickling client must be cut off");
        assert!(!answer.contains("200 OK"), "{answer}");
    }
    assert!(started.elapsed() < Duration::from_secs(5));

    // Their slots are free again: a real request is served.
    let mut good = tokio::net::TcpStream::connect(addr).await.unwrap();
    good.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let (closed, answer) = closed_within(&mut good, Duration::from_secs(5)).await;
    assert!(closed && answer.starts_with("HTTP/1.1 200 OK"), "{answer}");

    stop.cancel();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_before_it_is_parsed() {
    let huge = vec![b' '; MAX_REQUEST_BODY_BYTES + 1];
    let response = guarded(false).oneshot(post(huge)).await.unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#;
    let response = guarded(false).oneshot(post(call)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_draining_server_refuses_new_calls_but_not_other_requests() {
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#;
    let response = guarded(true).oneshot(post(call)).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()[header::RETRY_AFTER], "1");
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let response = guarded(true).oneshot(post(list)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[test]
fn a_configured_token_is_trimmed_or_refused_never_dropped() {
    for (raw, expected) in [
        ("t0k3n\n", "Bearer t0k3n"),
        ("t0k3n\r\n", "Bearer t0k3n"),
        ("  t0k3n\t", "Bearer t0k3n"),
    ] {
        let token = BearerToken::new(raw).unwrap();
        assert_eq!(token.header, expected, "{raw:?}");
    }
    for (raw, error) in [
        ("", TokenError::Empty),
        ("\n\r\t ", TokenError::Empty),
        ("to\nken", TokenError::InvalidCharacter(2)),
        ("to ken", TokenError::InvalidCharacter(2)),
        ("tok\u{0}en", TokenError::InvalidCharacter(3)),
        ("tökén", TokenError::InvalidCharacter(1)),
        ("tok\x7f", TokenError::InvalidCharacter(3)),
    ] {
        assert_eq!(BearerToken::new(raw).unwrap_err(), error, "{raw:?}");
    }
    assert!(!format!("{:?}", BearerToken::new("s3cret").unwrap()).contains("s3cret"));
}

#[tokio::test]
async fn a_trimmed_token_is_required_exactly() {
    let metrics = Arc::new(Metrics::new());
    let shared = Arc::new(Shared {
        metrics: metrics.clone(),
        server: GadgetServer::new(Arc::new(gadget_core::tool::Toolbox::new()), metrics),
        calls: Arc::new(Semaphore::new(1)),
        auth: Arc::new(crate::auth::Auth::Token(
            BearerToken::new("t0k3n\n").unwrap().header,
        )),
        draining: AtomicBool::new(false),
        hosts: AllowedHosts::new(&[]),
        state: None,
    });
    let router = axum::Router::new()
        .route("/mcp", axum::routing::post(|| async { "reached" }))
        .layer(axum::middleware::from_fn_with_state(shared, guard));
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#;
    for (header, status) in [
        (None, StatusCode::UNAUTHORIZED),
        (Some("Bearer t0k3n\n"), StatusCode::UNAUTHORIZED),
        (Some("Bearer t0k3"), StatusCode::UNAUTHORIZED),
        (Some("Bearer t0k3n"), StatusCode::OK),
    ] {
        let mut request = post(call);
        if let Some(h) = header
            && let Ok(value) = HeaderValue::from_str(h)
        {
            request.headers_mut().insert(header::AUTHORIZATION, value);
        }
        let response = router.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), status, "{header:?}");
    }
}
