use super::*;

/// What Prometheus 2.x sends (`scrape_protocols` at its default).
const PROMETHEUS_2: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
/// What Prometheus 3.x sends.
const PROMETHEUS_3: &str = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";

#[test]
fn openmetrics_goes_to_whoever_prefers_it_and_0_0_4_to_everyone_else() {
    for (accept, format) in [
        (None, Format::Text),
        (Some(""), Format::Text),
        (Some("*/*"), Format::Text),
        (Some("text/plain"), Format::Text),
        (Some("text/plain; version=0.0.4"), Format::Text),
        (Some(PROMETHEUS_2), Format::OpenMetrics),
        (Some(PROMETHEUS_3), Format::OpenMetrics),
        (Some("application/openmetrics-text"), Format::OpenMetrics),
        (
            Some("Application/OpenMetrics-Text; Version=\"1.0.0\""),
            Format::OpenMetrics,
        ),
        // Ranked by quality, then in the client's order.
        (
            Some("text/plain;q=0.5, application/openmetrics-text;q=0.9"),
            Format::OpenMetrics,
        ),
        (
            Some("application/openmetrics-text;q=0.5, text/plain"),
            Format::Text,
        ),
        (
            Some("application/openmetrics-text, text/plain"),
            Format::OpenMetrics,
        ),
        (
            Some("text/plain, application/openmetrics-text"),
            Format::Text,
        ),
        // A quality of 0 refuses; a version not served names nothing.
        (Some("application/openmetrics-text;q=0"), Format::Text),
        (
            Some("application/openmetrics-text;version=2.0.0"),
            Format::Text,
        ),
        (
            Some("text/plain;version=1.0.0, application/openmetrics-text;q=0.1"),
            Format::OpenMetrics,
        ),
        // A quality that does not read counts as 0.
        (Some("application/openmetrics-text;q=high"), Format::Text),
        (Some("application/openmetrics-text;q=1.5"), Format::Text),
        (Some("application/openmetrics-text;q=0.0001"), Format::Text),
    ] {
        assert_eq!(Format::negotiate(accept), format, "{accept:?}");
    }
}

#[test]
fn qualities_read_to_the_thousandth() {
    for (q, thousandths_of) in [
        ("1", 1000),
        ("1.0", 1000),
        ("1.000", 1000),
        ("0.5", 500),
        ("0.75", 750),
        ("0.001", 1),
        ("0", 0),
        ("1.001", 0),
        ("2", 0),
        ("-0.5", 0),
        ("", 0),
        ("0.+1", 0),
    ] {
        assert_eq!(thousandths(q), thousandths_of, "{q}");
    }
}

#[test]
fn counters_are_named_as_their_samples_and_openmetrics_only_lines_go() {
    let openmetrics = concat!(
        "# HELP app_requests Requests.\n",
        "# TYPE app_requests counter\n",
        "app_requests_total{code=\"ok\"} 3\n",
        "# HELP app_open Open now.\n",
        "# TYPE app_open gauge\n",
        "app_open 1\n",
        "# HELP app_latency_seconds Latency.\n",
        "# TYPE app_latency_seconds histogram\n",
        "# UNIT app_latency_seconds seconds\n",
        "app_latency_seconds_sum 0.5\n",
        "app_latency_seconds_count 1\n",
        "app_latency_seconds_bucket{le=\"+Inf\"} 1\n",
        "# HELP app_other Something.\n",
        "# TYPE app_other unknown\n",
        "app_other 2\n",
        "# EOF\n",
    );
    assert_eq!(Format::OpenMetrics.write(openmetrics), openmetrics);
    assert_eq!(
        Format::Text.write(openmetrics),
        concat!(
            "# HELP app_requests_total Requests.\n",
            "# TYPE app_requests_total counter\n",
            "app_requests_total{code=\"ok\"} 3\n",
            "# HELP app_open Open now.\n",
            "# TYPE app_open gauge\n",
            "app_open 1\n",
            "# HELP app_latency_seconds Latency.\n",
            "# TYPE app_latency_seconds histogram\n",
            "app_latency_seconds_sum 0.5\n",
            "app_latency_seconds_count 1\n",
            "app_latency_seconds_bucket{le=\"+Inf\"} 1\n",
            "# HELP app_other Something.\n",
            "# TYPE app_other untyped\n",
            "app_other 2\n",
        )
    );
}

#[test]
fn each_format_says_what_it_is() {
    assert_eq!(
        Format::OpenMetrics.content_type(),
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert_eq!(
        Format::Text.content_type(),
        "text/plain; version=0.0.4; charset=utf-8"
    );
}
