//! The approval rules' tests: deny and approve rules by argument, rules
//! for one client, argument globs, bad rules, canonical JSON.

use super::*;
use crate::client::ClientId;
use serde_json::json;

pub(super) fn rule(
    gadget: &str,
    param: &str,
    glob: Option<&str>,
    regex: Option<&str>,
    action: RuleAction,
) -> RuleSpec {
    RuleSpec {
        gadget: gadget.into(),
        param: param.into(),
        matches: glob.map(str::to_string),
        regex: regex.map(str::to_string),
        action,
        reason: Some("the reason".into()),
        kind: None,
        client: None,
    }
}

#[test]
fn deny_rules_refuse_by_argument_and_win_over_approval() {
    let rules = Rules::new(
        vec!["Fetch*".into()],
        vec![
            rule("FetchUrl", "/url", Some("http://*"), None, RuleAction::Deny),
            rule(
                "fetchurl",
                "/url",
                None,
                Some(r"^https://intranet\."),
                RuleAction::Approve,
            ),
        ],
        None,
    )
    .unwrap();
    let denied = rules.check("FetchUrl", &json!({"url": "http://example.com"}), None);
    assert!(
        matches!(&denied, Admission::Deny { reason } if reason.starts_with("the reason (rule 1")),
        "{denied:?}"
    );
    let asked = rules.check(
        "FetchUrl",
        &json!({"url": "https://intranet.example"}),
        None,
    );
    let Admission::Ask { reasons, .. } = asked else {
        panic!("{asked:?}")
    };
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert_eq!(reasons[0], "[gadgets] approve = \"Fetch*\"");
    // Only the approve pattern applies to other URLs.
    assert!(
        matches!(rules.check("FetchUrl", &json!({"url": "https://x"}), None), Admission::Ask { reasons, .. } if reasons.len() == 1)
    );
    assert_eq!(
        rules.check("Calculator", &json!({"url": "http://x"}), None),
        Admission::Run
    );
}

#[test]
fn argument_globs_are_case_sensitive_and_see_each_array_element() {
    let rules = Rules::new(
        Vec::new(),
        vec![
            rule(
                "WriteFile",
                "/path",
                Some("/out/secret*"),
                None,
                RuleAction::Approve,
            ),
            rule("Batch", "/paths", Some("*.key"), None, RuleAction::Deny),
            rule("Calc", "/a", Some("4?"), None, RuleAction::Approve),
        ],
        None,
    )
    .unwrap();
    assert!(matches!(
        rules.check("WriteFile", &json!({"path": "/out/secret.txt"}), None),
        Admission::Ask { .. }
    ));
    assert_eq!(
        rules.check("WriteFile", &json!({"path": "/out/SECRET.txt"}), None),
        Admission::Run
    );
    assert_eq!(
        rules.check("WriteFile", &json!({"other": "/out/secret"}), None),
        Admission::Run
    );
    assert!(matches!(
        rules.check("Batch", &json!({"paths": ["a.txt", "b.key"]}), None),
        Admission::Deny { .. }
    ));
    // Non-string values match by their JSON text.
    assert!(matches!(
        rules.check("Calc", &json!({"a": 42}), None),
        Admission::Ask { .. }
    ));
    assert_eq!(rules.rules_for("writefile").len(), 1);
    let served = ["WriteFile".to_string(), "Batch".to_string()];
    assert_eq!(
        rules.unmatched(&served, |_| false),
        ["rule 3 (gadget = \"Calc\")"]
    );
    // A pattern claimed elsewhere (an upstream server's tools) is matched.
    assert!(rules.unmatched(&served, |p| p == "Calc").is_empty());
    assert!(rules.rules_for("Batch")[0].starts_with("a call is refused when /paths matches"));
}

#[test]
fn bad_rules_are_refused_with_where_they_are() {
    let err = |spec: RuleSpec| Rules::new(Vec::new(), vec![spec], None).unwrap_err();
    assert!(
        err(rule("A", "url", Some("*"), None, RuleAction::Deny))
            .contains("rules[1].param: 'url' is not a JSON pointer")
    );
    assert!(err(rule("A", "/u", None, None, RuleAction::Deny)).contains("`matches"));
    assert!(err(rule("A", "/u", Some("*"), Some("x"), RuleAction::Deny)).contains("not both"));
    assert!(err(rule("A", "/u", None, Some("("), RuleAction::Deny)).starts_with("rules[1].regex"));
    assert!(Rules::new(Vec::new(), Vec::new(), Some(Duration::ZERO)).is_err());
}

#[test]
fn canonical_json_sorts_keys_at_every_level() {
    let a = json!({"b": 1, "a": {"d": [1, {"y": 2, "x": 1}], "c": "é"}});
    assert_eq!(
        canonical_json(&a),
        r#"{"a":{"c":"é","d":[1,{"x":1,"y":2}]},"b":1}"#
    );
}

#[test]
fn a_rule_naming_a_client_holds_for_that_caller_only() {
    let mut deny = rule("FetchUrl", "/url", Some("*"), None, RuleAction::Deny);
    deny.client = Some("al*".into());
    let rules = std::sync::Arc::new(Rules::new(Vec::new(), vec![deny], None).unwrap());
    let params = json!({"url": "https://example.com"});
    let denied = rules.check_for("FetchUrl", &params, None, &ClientId::subject("alice"));
    assert!(
        matches!(&denied, Admission::Deny { reason } if reason.ends_with("for client al*)")),
        "{denied:?}"
    );
    // Case-sensitive, and an anonymous caller is no client.
    let others = [
        ClientId::subject("bob"),
        ClientId::subject("Alice"),
        ClientId::anonymous_on("alice"),
        ClientId::Local,
    ];
    for other in others {
        assert_eq!(
            rules.check_for("FetchUrl", &params, None, &other),
            Admission::Run,
            "{other:?}"
        );
    }
    let url = json!({"type": "object", "properties": {"url": {"type": "string", "format": "uri"}}});
    assert!(
        rules
            .request_denials("FetchUrl", Some(&url), &ClientId::subject("alice"))
            .is_some()
    );
    assert!(
        rules
            .request_denials("FetchUrl", Some(&url), &ClientId::subject("bob"))
            .is_none()
    );
}
