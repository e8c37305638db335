//! gadget-mcp: the Model Context Protocol front end of gadget-host. Every
//! loaded, granted, allowed gadget is an MCP tool ([`server`]), served over
//! stdio (`gadget mcp`) or Streamable HTTP (`gadget serve`, [`http`]) with
//! the official Rust SDK, rmcp. The HTTP server is stateless between calls,
//! so an operator runs as many replicas as the load needs; it has health
//! and readiness endpoints, Prometheus [`metrics`], a cap on concurrent
//! calls, bearer-token authentication and graceful shutdown.

pub mod http;
pub mod metrics;
pub mod server;

pub use server::GadgetServer;
