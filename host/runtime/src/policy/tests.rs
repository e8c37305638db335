//! The policy file: strict, every figure checked, and fuzzed.

use super::*;

/// Fuzz target: any text, valid TOML or not, is a policy or an error
/// (never a panic), and a policy's figures are usable.
#[test]
fn fuzz_policy_files() {
    let seeds: &[&[u8]] = &[
        include_bytes!("../../../../examples/config.toml"),
        b"[limits]\nmax-timeout-ms = 120000\nmax-memory-mib = 64\n",
        b"[plugins.p]\nprefix = \"x_\"\nhttp = [\"https://a.example\"]\nfiles = [{ host = \"d\", guest = \"/d\", mode = \"rw\", write-quota-mib = 1 }]\n",
        b"[plugins.s]\nllm = { models = [\"a:b\"], max-usd-per-call = 0.5, max-usd-per-run = 2.0 }\nconfig = { K = { env = \"V\" } }\n",
        b"[plugins.s.secrets.K]\nenv = \"V\"\norigins = [\"https://a.example\"]\nheader = \"Authorization\"\nformat = \"Bearer {}\"\n",
        b"[gadgets]\nallow = [\"Calc*\"]\ndeny = [\"X\"]\n[agents.r]\ndescription = \"d\"\ngadgets = [\"*\"]\n",
    ];
    let runs = gadget_core::fuzz::run("policy", seeds, |input| {
        let text = String::from_utf8_lossy(input);
        if let Ok(policy) = Policy::parse(&text, Path::new("/base")) {
            let _ = policy.ceilings();
        }
    });
    assert!(runs > 0);
}

fn parse(text: &str) -> Result<Policy, String> {
    Policy::parse(text, Path::new("/etc/gadget-host"))
}

#[test]
fn grants_and_gadget_rules_are_read() {
    let policy = parse(
        r#"
[gadgets]
deny = ["Sleep", "Json*"]

[plugins.web]
http = ["https://api.example.com", "http://127.0.0.1:8080", "https://*.wikipedia.org"]
allow-addresses = ["10.0.0.0/8"]

[plugins.files]
files = [{ host = "./data", guest = "/data", mode = "rw" }, { host = "/srv/docs" }]

[plugins.weather]
config = { API_KEY = { env = "WEATHER_API_KEY" }, UNITS = { value = "metric" } }
"#,
    )
    .unwrap();
    assert!(policy.gadgets.check("sleep").is_err());
    assert!(policy.gadgets.check("JsonFormat").is_err());
    assert!(policy.gadgets.check("Calculator").is_ok());
    assert_eq!(policy.plugins["web"].http.len(), 3);
    let files = &policy.plugins["files"].files;
    assert_eq!(files[0].host, Path::new("/etc/gadget-host/./data"));
    assert_eq!(files[0].mode, FileMode::ReadWrite);
    assert_eq!(files[1].mode, FileMode::ReadOnly);
    assert_eq!(
        policy.plugins["weather"].config["API_KEY"].env.as_deref(),
        Some("WEATHER_API_KEY")
    );
}

#[test]
fn bad_grants_are_refused_with_their_place() {
    let error = parse("[plugins.web]\nhttp = [\"api.example.com\"]\n").unwrap_err();
    assert!(error.contains("plugins.web.http"), "{error}");
    assert!(error.contains("scheme is required"), "{error}");
    let error =
        parse("[plugins.f]\nfiles = [{ host = \"/x\", guest = \"../etc\" }]\n").unwrap_err();
    assert!(error.contains("not a guest path"), "{error}");
    let error = parse("[plugins.f]\nfiles = [{ host = \"/x\", mode = \"rwx\" }]\n").unwrap_err();
    assert!(error.contains("line 2"), "{error}");
    let error =
        parse("[plugins.w]\nconfig = { K = { env = \"A\", value = \"b\" } }\n").unwrap_err();
    assert!(error.contains("exactly one"), "{error}");
    let error = parse("[gadgets]\ndenny = [\"x\"]\n").unwrap_err();
    assert!(
        error.contains("unknown field `denny`") && error.contains("line 2"),
        "{error}"
    );
}

#[test]
fn allow_lists_and_globs() {
    let policy =
        parse("[gadgets]\nallow = [\"Calc*\", \"?ate*\"]\ndeny = [\"CalcSecret\"]\n").unwrap();
    assert!(policy.gadgets.check("calculator").is_ok());
    assert!(policy.gadgets.check("DateTime").is_ok());
    assert_eq!(
        policy.gadgets.check("CalcSecret"),
        Err(DenyRule::Denied {
            pattern: "CalcSecret".into(),
            origin: RuleSource::File(None),
        })
    );
    assert_eq!(
        policy.gadgets.check("Sleep"),
        Err(DenyRule::NotAllowed { file: None })
    );
    assert!(
        DenyRule::NotAllowed { file: None }
            .to_string()
            .contains("allow list"),
        "the rule names the list"
    );
    // A refusal says where the rule was written.
    let mut policy = policy;
    policy.gadgets.file = Some(PathBuf::from("ops/policy.toml"));
    policy.deny_gadget("Date*");
    assert_eq!(
        policy.gadgets.check("CalcSecret").unwrap_err().to_string(),
        "denied by the operator's policy (ops/policy.toml: [gadgets] deny = \"CalcSecret\")"
    );
    assert_eq!(
        policy.gadgets.check("DateTime").unwrap_err().to_string(),
        "denied for this run (--deny-gadget \"Date*\")"
    );
    assert!(glob_matches("*a*b*c*", "xxaxxbxxcxx"));
    assert!(!glob_matches("*a*b*c*d", &"ab".repeat(5000)));
}

#[test]
fn command_line_grants() {
    let mut policy = Policy::default();
    policy.add_grant("web:http=https://example.com").unwrap();
    policy.add_grant("files:files=/srv/data:/data:rw").unwrap();
    policy.add_grant("files:files=/srv/docs").unwrap();
    policy
        .add_grant("weather:config=API_KEY=env:WEATHER_KEY")
        .unwrap();
    policy
        .add_grant("weather:config=UNITS=value:metric")
        .unwrap();
    assert_eq!(policy.plugins["web"].http, ["https://example.com"]);
    let files = &policy.plugins["files"].files;
    assert_eq!(files[0].guest.as_deref(), Some("/data"));
    assert_eq!(files[0].mode, FileMode::ReadWrite);
    assert_eq!(files[1].guest, None);
    assert_eq!(policy.plugins["weather"].config.len(), 2);
    assert!(
        policy
            .add_grant("web:ftp=x")
            .unwrap_err()
            .contains("not http, files, config or llm")
    );
    assert!(policy.add_grant("web").is_err());
    assert!(
        policy
            .add_grant("web:http=example.com")
            .unwrap_err()
            .contains("scheme is required")
    );
    policy.deny_gadget("Sleep");
    assert!(policy.gadgets.check("SLEEP").is_err());
}

#[test]
fn an_empty_policy_keeps_every_default() {
    let policy = parse("").unwrap();
    assert_eq!(policy, Policy::default());
    assert_eq!(policy.ceilings(), LimitCeilings::default());
    assert_eq!(policy.host_memory_bytes(), None);
}

#[test]
fn limits_and_prefixes_are_read() {
    let policy = parse(
        "[limits]\nmax-timeout-ms = 5000\nmax-memory-mib = 64\nhost-memory-mib = 512\n\n[plugins.web]\nprefix = \"web_\"\n",
    )
    .unwrap();
    let ceilings = policy.ceilings();
    assert_eq!(ceilings.timeout, Duration::from_secs(5));
    assert_eq!(ceilings.memory_bytes, 64 << 20);
    assert_eq!(policy.host_memory_bytes(), Some(512 << 20));
    assert_eq!(policy.prefix("web"), Some("web_"));
    assert_eq!(policy.prefix("other"), None);
}

#[test]
fn unknown_fields_are_errors_that_name_the_line() {
    let error = parse("[limits]\nmax-timeout-ms = 5\nmax-memry-mib = 64\n").unwrap_err();
    assert!(error.contains("unknown field `max-memry-mib`"), "{error}");
    assert!(error.ends_with("(line 3: max-memry-mib = 64)"), "{error}");
    let error = parse("[plugin.web]\nprefix = \"w_\"\n").unwrap_err();
    assert!(error.contains("unknown field `plugin`"), "{error}");
}

#[test]
fn values_past_the_hard_maximum_or_bad_prefixes_are_refused() {
    let error = parse("[limits]\nmax-memory-mib = 8192\n").unwrap_err();
    assert!(
        error.contains("over the host's hard maximum of 4096"),
        "{error}"
    );
    let error = parse("[limits]\nmax-timeout-ms = 0\n").unwrap_err();
    assert!(error.contains("must be more than 0"), "{error}");
    let error = parse("[plugins.x]\nprefix = \"bad-prefix\"\n").unwrap_err();
    assert!(error.contains("plugins.x.prefix"), "{error}");
    let long = format!(
        "[plugins.x]\nprefix = \"{}\"\n",
        "p".repeat(MAX_PREFIX_BYTES + 1)
    );
    let error = parse(&long).unwrap_err();
    assert!(error.contains("is over 16 bytes"), "{error}");
}

#[test]
fn llm_grants_name_provider_models_and_a_real_budget() {
    let policy = parse(
        "[plugins.s]\nllm = { models = [\"openai:gpt-4o-mini\"], max-usd-per-call = 0.05 }\n",
    )
    .unwrap();
    let llm = policy.plugins["s"].llm.as_ref().unwrap();
    assert_eq!(llm.models, ["openai:gpt-4o-mini"]);
    assert_eq!(llm.max_usd_per_call, Some(0.05));
    let error = parse("[plugins.s]\nllm = { models = [\"gpt-4o\"] }\n").unwrap_err();
    assert!(
        error.contains("'gpt-4o' is not \"provider:model\""),
        "{error}"
    );
    let error = parse("[plugins.s]\nllm = { models = [] }\n").unwrap_err();
    assert!(error.contains("name at least one model"), "{error}");
    let error =
        parse("[plugins.s]\nllm = { models = [\"a:b\"], max-usd-per-call = -1.0 }\n").unwrap_err();
    assert!(error.contains("is not an amount of USD"), "{error}");
    let error =
        parse("[plugins.s]\nllm = { models = [\"a:b\"], max-usd-per-run = nan }\n").unwrap_err();
    assert!(
        error.contains("llm.max-usd-per-run: NaN is not an amount"),
        "{error}"
    );
    let policy =
        parse("[plugins.s]\nllm = { models = [\"a:b\"], max-usd-per-run = 2.5 }\n").unwrap();
    assert_eq!(
        policy.plugins["s"].llm.as_ref().unwrap().max_usd_per_run,
        Some(2.5)
    );
    let error = parse("[llm]\nmodel = \"gpt-4o\"\n").unwrap_err();
    assert!(error.contains("llm.model: 'gpt-4o'"), "{error}");
    let error =
        parse("[llm.models.\"a:b\"]\ninput-per-mtok = -1.0\noutput-per-mtok = 1.0\n").unwrap_err();
    assert!(error.contains("is not a price"), "{error}");
    let mut policy = Policy::default();
    policy.add_grant("s:llm=openai:m").unwrap();
    assert_eq!(
        policy.plugins["s"].llm.as_ref().unwrap().models,
        ["openai:m"]
    );
    assert!(policy.add_grant("s:llm=m").is_err());
}

#[test]
fn brokered_secrets_are_checked_as_written() {
    let base = "[plugins.p.secrets.KEY]\nenv = \"VAR\"\n";
    let ok = parse(&format!(
        "{base}origins = [\"https://a.example\", {{ origin = \"https://b.example\", methods = [\"GET\"] }}]\nheader = \"Authorization\"\nformat = \"Bearer {{}}\"\n"
    ))
    .unwrap();
    assert_eq!(ok.plugins["p"].secrets["KEY"].origins.len(), 2);
    for (extra, said) in [
        ("origins = []\n", "name at least one origin"),
        ("origins = [\"a.example\"]\n", "the scheme is required"),
        ("origins = [\"https://a.example/path\"]\n", "without a path"),
        (
            "origins = [\"https://a.example\"]\nformat = \"Bearer {}\"\n",
            "name that header too",
        ),
        (
            "origins = [\"https://a.example\"]\nheader = \"bad header\"\n",
            "is not a header name",
        ),
        (
            "origins = [\"https://a.example\"]\nheader = \"Host\"\n",
            "the host sets Host itself",
        ),
        (
            "origins = [\"https://a.example\"]\nheader = \"X-Key\"\nformat = \"Bearer\"\n",
            "must hold {} once",
        ),
        (
            "origins = [\"https://a.example\"]\nheader = \"X-Key\"\nformat = \"{} {}\"\n",
            "must hold {} once",
        ),
        (
            "origins = [\"https://a.example\"]\nvalue = \"x\"\n",
            "unknown field",
        ),
    ] {
        let error = parse(&format!("{base}{extra}")).unwrap_err();
        assert!(error.contains(said), "{extra}: {error}");
    }
    let empty_env =
        parse("[plugins.p.secrets.KEY]\nenv = \"\"\norigins = [\"https://a.example\"]\n")
            .unwrap_err();
    assert!(
        empty_env.contains("name the environment variable"),
        "{empty_env}"
    );
    let both = parse(&format!(
        "{base}origins = [\"https://a.example\"]\n[plugins.p.config]\nKEY = {{ value = \"x\" }}\n"
    ))
    .unwrap_err();
    assert!(both.contains("KEY is also in plugins.p.config"), "{both}");
    let bad_key =
        parse("[plugins.p.secrets.1KEY]\nenv = \"V\"\norigins = [\"https://a.example\"]\n")
            .unwrap_err();
    assert!(bad_key.contains("is not a configuration key"), "{bad_key}");
}

/// A policy file is read only as a regular file within its limit.
#[test]
fn a_policy_file_is_a_regular_file_within_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.toml");
    std::fs::write(&big, "#".repeat(MAX_MANIFEST_BYTES as usize + 1)).unwrap();
    assert!(matches!(
        Policy::from_file(&big),
        Err(PolicyError::TooLarge { .. })
    ));
    let refused = Policy::from_file(dir.path()).unwrap_err().to_string();
    assert!(refused.contains("not a regular file"), "{refused}");
    let fine = dir.path().join("fine.toml");
    std::fs::write(&fine, "[limits]\nmax-timeout-ms = 1000\n").unwrap();
    assert!(Policy::from_file(&fine).is_ok());
}
