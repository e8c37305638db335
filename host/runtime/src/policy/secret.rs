//! `[plugins.NAME.secrets.KEY]`: a secret the host holds for a plugin
//! and puts on its HTTP requests itself (a brokered secret).
//!
//! ```toml
//! [plugins.github.secrets.API_KEY]
//! env = "GITHUB_TOKEN"                  # where the host reads the value
//! origins = ["https://api.github.com"]  # the only origins it may go to
//! header = "Authorization"              # optional: the host sets this header
//! format = "Bearer {}"                  # optional: the header's value
//! ```
//!
//! The gadget's `API_KEY` is a placeholder, never the value; how the host
//! swaps one for the other is [`crate::grants::BrokeredSecret`]. Checked
//! here as written, before anything loads.

use super::plugin::{ConfigSource, SecretSpec};
use crate::grants::{self, MAX_GRANT_SCOPES};

/// Headers a secret may not be put in: the host writes them itself (the
/// trace context, the framing) or they name the server, not a credential.
const HOST_SET_HEADERS: [&str; 6] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "traceparent",
    "accept-encoding",
];

/// Checks `[plugins.{plugin}.secrets.{key}]` as written.
pub(crate) fn check_secret(
    plugin: &str,
    key: &str,
    spec: &SecretSpec,
    config: Option<&ConfigSource>,
) -> Result<(), String> {
    let at = format!("plugins.{plugin}.secrets.{key}");
    grants::check_config_key(key).map_err(|e| format!("plugins.{plugin}.secrets: {e}"))?;
    if config.is_some() {
        return Err(format!(
            "{at}: {key} is also in plugins.{plugin}.config; give it one way (a secret the host keeps, or config the gadget sees)"
        ));
    }
    if spec.env.is_empty() {
        return Err(format!(
            "{at}.env: name the environment variable that holds the value"
        ));
    }
    if spec.origins.is_empty() {
        return Err(format!(
            "{at}.origins: name at least one origin the secret may be sent to (\"https://api.example.com\")"
        ));
    }
    if spec.origins.len() > MAX_GRANT_SCOPES {
        return Err(format!("{at}.origins: at most {MAX_GRANT_SCOPES} origins"));
    }
    let (_, name) = spec.compiled().map_err(|e| format!("{at}.{e}"))?;
    match (name, &spec.format) {
        (None, Some(_)) => {
            return Err(format!(
                "{at}.format: a format is the value of the header the host sets; name that header too (header = \"Authorization\")"
            ));
        }
        (Some(name), format) => {
            let header = spec.header.as_deref().unwrap_or_default();
            if HOST_SET_HEADERS.contains(&name.as_str()) {
                return Err(format!(
                    "{at}.header: the host sets {header} itself; put the secret in a credential header such as Authorization"
                ));
            }
            if let Some(format) = format {
                if format.matches("{}").count() != 1 {
                    return Err(format!(
                        "{at}.format: '{format}' must hold {{}} once, where the secret goes (\"Bearer {{}}\")"
                    ));
                }
                if http::HeaderValue::from_str(&format.replace("{}", "")).is_err() {
                    return Err(format!("{at}.format: '{format}' is not a header value"));
                }
            }
        }
        (None, None) => {}
    }
    Ok(())
}
