//! Integration tests: real components, real processes, no mocks of the
//! runtime. Guests are built once per run by `scripts/build-guests.sh`.

mod agent;
mod approvals;
mod asks;
mod audit;
mod capabilities;
mod catalog;
mod cli;
mod common;
mod containment;
mod content;
mod executor;
mod first_hour;
mod first_hour_again;
mod gates;
mod hostile;
mod http_grants;
mod languages;
mod llm;
mod llm_server;
mod loading;
mod mcp;
mod mistakes;
mod native;
mod oci;
mod parser;
mod serve;
mod shipped;
mod signing;
mod stop;
mod swatches;
mod telemetry;
mod transcripts;
mod upstream;
mod upstream_oauth;
mod upstream_policy;
