//! Which service answers a stream. The runtime's own calls go straight to its generated
//! server; health and reflection go through tonic's routes (an axum router), which would
//! otherwise cost every call a path lookup, an extensions map for its (absent) path
//! parameters, and two boxed layers around its response body, polled on every frame.

use std::convert::Infallible;
use std::future::Future;

use futures_util::future::Either;
use http::{Request, Response};
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::service::Routes;
use tower::Service;

use crate::service::{Compression, ModelRuntimeServer, ModelRuntimeService};

/// The runtime's generated server, as it is served.
type Runtime = Compression<ModelRuntimeServer<ModelRuntimeService>>;

/// The services a connection's streams are answered by.
#[derive(Clone)]
pub(crate) struct Services {
    runtime: Runtime,
    /// Everything, the runtime's service among them (for gRPC-Web, which takes them all).
    routes: Routes,
}

impl Services {
    /// `runtime`, served directly, and `routes` for every other service.
    pub(crate) fn new(runtime: Runtime, routes: Routes) -> Self {
        Self { runtime, routes }
    }

    /// Every service on one set of routes (the ingress's gRPC-Web serves them so).
    pub(crate) fn routes(&self) -> &Routes {
        &self.routes
    }

    /// The answer to `request`, from the service its path names. Both are always ready.
    pub(super) fn call(
        &mut self,
        request: Request<Body>,
    ) -> impl Future<Output = Result<Response<Body>, Infallible>> + Send + use<> {
        if is_runtimes(request.uri().path()) {
            Either::Left(self.runtime.call(request))
        } else {
            Either::Right(self.routes.call(request))
        }
    }
}

/// Whether `path` is one of the runtime service's methods (`/model_runtime.v1.ModelRuntime/`
/// and a method; an unknown method is the generated server's `UNIMPLEMENTED`).
fn is_runtimes(path: &str) -> bool {
    path.strip_prefix('/')
        .and_then(|rest| rest.strip_prefix(Runtime::NAME))
        .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::is_runtimes;

    #[test]
    fn only_the_runtimes_methods_go_straight_to_it() {
        assert!(is_runtimes("/model_runtime.v1.ModelRuntime/Execute"));
        assert!(is_runtimes("/model_runtime.v1.ModelRuntime/Nothing"));
        assert!(!is_runtimes("/model_runtime.v1.ModelRuntimeX/Execute"));
        assert!(!is_runtimes("/model_runtime.v1.ModelRuntime"));
        assert!(!is_runtimes("/grpc.health.v1.Health/Check"));
        assert!(!is_runtimes("model_runtime.v1.ModelRuntime/Execute"));
    }
}
