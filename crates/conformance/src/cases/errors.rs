//! A caller's mistakes: each refused with INVALID_ARGUMENT naming the field, nothing changed;
//! an unknown execution is NOT_FOUND.

use tonic::Code;

use crate::observe::{Ctx, nonce_of};
use crate::pb;
use crate::verdict::{Evidence, Verdict};

/// What makes a request bad.
type Spoil = fn(&mut pb::ExecuteRequest);

pub async fn bad_input(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let bad: [(Spoil, &str); 3] = [
        (|r| r.ability.clear(), "ability"),
        (
            |r| r.input = Some(pb::ExecutionInput::default()),
            "messages",
        ),
        (|r| r.ability = "kit-no-such-ability".into(), "ability"),
    ];
    let mut verdicts = Vec::new();
    for (spoil, field) in bad {
        let mut request = ctx.request("answer");
        let nonce = nonce_of(&request);
        spoil(&mut request);
        let what = format!("{request:?}");
        let result = ctx.client.clone().execute(request).await;
        let status = result.err();
        let named = status
            .as_ref()
            .is_some_and(|s| s.code() == Code::InvalidArgument && s.message().contains(field));
        let asked = ctx.log.for_nonce(&nonce).len();
        verdicts.push(Verdict::check(
            case,
            "ERR-1",
            named && asked == 0,
            || format!("a request with a bad `{field}` was not refused with INVALID_ARGUMENT naming it: {status:?}"),
            || Evidence {
                events: vec![what],
                received: Vec::new(),
            },
        ));
    }
    // An id of the implementation's own form that it never issued: a real one with its last
    // character changed.
    let real = ctx.execute(case, ctx.request("answer")).await;
    let unknown = sibling(real.id());
    let get = ctx
        .client
        .clone()
        .get_execution(pb::GetExecutionRequest {
            execution_id: unknown.clone(),
        })
        .await;
    let watch = ctx.watch(&ctx.client, &unknown, 0).await;
    let cancel = ctx
        .client
        .clone()
        .cancel_execution(pb::CancelExecutionRequest {
            execution_id: unknown.clone(),
            reason: String::new(),
        })
        .await;
    let found = |code: Option<Code>| code == Some(Code::NotFound);
    verdicts.push(Verdict::check(
        case,
        "ERR-2",
        found(get.as_ref().err().map(tonic::Status::code))
            && found(watch.as_ref().err().map(tonic::Status::code))
            && found(cancel.as_ref().err().map(tonic::Status::code)),
        || format!("GetExecution, Watch and CancelExecution of the unknown execution {unknown}: not all NOT_FOUND"),
        Evidence::default,
    ));
    verdicts
}

/// `id` with its last character replaced by another of the same kind.
fn sibling(id: &str) -> String {
    let mut chars: Vec<char> = id.chars().collect();
    if let Some(last) = chars.last_mut() {
        *last = match *last {
            '0' => '1',
            c if c.is_ascii_digit() => '0',
            'a' => 'b',
            'A' => 'B',
            c if c.is_ascii_lowercase() => 'a',
            c if c.is_ascii_uppercase() => 'A',
            _ => '0',
        };
    }
    chars.into_iter().collect()
}
