//! Time bounds in the core, on a paused clock: the deadline cuts a running attempt; the retry
//! budget bounds trying (queue waits, with `min_attempt_time` left for the attempt) and never
//! an attempt already sent.

use super::*;

#[tokio::test(start_paused = true)]
async fn the_deadline_cuts_a_hung_provider_and_releases_its_permit() {
    let rt = runtime();
    let mut r = request("hang", "hi");
    r.deadline = Some(SystemTime::now() + Duration::from_secs(5));
    let started = Instant::now();
    let (view, _) = finish(&rt, r).await;
    // The deadline is wall-clock; a little real time passes before submission.
    let elapsed = started.elapsed();
    assert!(
        elapsed <= Duration::from_secs(5) && elapsed > Duration::from_millis(4900),
        "{elapsed:?}"
    );
    let error = view.error.unwrap();
    assert_eq!(
        (error.code, error.outcome),
        (ErrorCode::DeadlineExceeded, Outcome::Unknown)
    );
    assert_eq!(view.attempts[0].outcome, Some(Outcome::Unknown));
    let provider = &rt.metadata().providers[0];
    assert_eq!((provider.in_flight, provider.queued), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn the_retry_budget_does_not_cut_a_reply_already_streaming() {
    let rt = runtime();
    let prompt = "one two three four five six seven eight nine ten";
    let started = Instant::now();
    let (view, _) = finish(&rt, request("long", prompt)).await;
    assert_eq!(view.state, ExecutionState::Succeeded, "{:?}", view.error);
    assert_eq!(view.result.unwrap().output.text, prompt);
    assert!(
        started.elapsed() >= Duration::from_millis(450),
        "streamed past the 100ms budget"
    );
}

#[tokio::test(start_paused = true)]
async fn the_retry_budget_does_not_cut_an_attempt_waiting_for_its_first_output() {
    // A reasoning model thinks for 3 s before its first text; the budget is 1 s.
    let rt = runtime();
    let started = Instant::now();
    let (view, _) = finish(&rt, request("thinks", "deep thought")).await;
    assert_eq!(view.state, ExecutionState::Succeeded, "{:?}", view.error);
    assert_eq!(view.result.unwrap().output.text, "deep thought");
    assert_eq!(view.attempts.len(), 1);
    assert!(started.elapsed() >= Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn a_queued_attempt_leaves_the_queue_with_min_attempt_time_of_budget_left() {
    let config = Config::builder()
        .provider(
            "one",
            ProviderSpec::scripted()
                .max_concurrency(1)
                .queue_capacity(4)
                .scripted_model("hang", &["text"], script(|s| s.hang = true)),
        )
        .policy(
            "long",
            PolicySpec::new(&["one/hang"]).retry_budget(Duration::from_secs(3600)),
        )
        .policy(
            "short",
            PolicySpec::new(&["one/hang"])
                .retry_budget(Duration::from_secs(1))
                .min_attempt_time(Duration::from_millis(600)),
        )
        .ability(
            "chat",
            AbilitySpec::new("long").allowed_policies(&["short"]),
        )
        .build()
        .unwrap();
    let rt = Runtime::new(config).unwrap();
    let holder = rt.submit(request("long", "hold the permit")).await.unwrap();
    let started = Instant::now();
    let (view, _) = finish(&rt, request("short", "wait in line")).await;
    // The budget ends at 1 s; an attempt must start with 600 ms of it left.
    assert_eq!(started.elapsed(), Duration::from_millis(400));
    let error = view.error.unwrap();
    assert_eq!(error.code, ErrorCode::RetryBudgetExhausted);
    assert_eq!(error.outcome, Outcome::NotStarted);
    rt.cancel(holder.id, None).await.unwrap();
}
