//! Which service answers a stream. The server's own service takes the calls on its path
//! directly, which saves each a path lookup in tonic's routes (an axum router), an extensions
//! map for its (absent) path parameters, and two boxed layers around its response body,
//! polled on every frame. Every other service, and any unknown one, goes through the routes.

use std::convert::Infallible;
use std::future::Future;

use futures_util::future::Either;
use http::{Request, Response};
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::service::Routes;
use tower::Service;

/// A service a stream may be handed to directly. It is always ready: it is called without
/// `poll_ready` (as the generated servers and tonic's routes are).
pub(super) trait Direct:
    Service<Request<Body>, Response = Response<Body>, Error = Infallible, Future: Send + 'static>
    + NamedService
    + Clone
    + Send
    + 'static
{
}

impl<S> Direct for S where
    S: Service<
            Request<Body>,
            Response = Response<Body>,
            Error = Infallible,
            Future: Send + 'static,
        > + NamedService
        + Clone
        + Send
        + 'static
{
}

/// The services a connection's streams are answered by: `S` for its own calls, the routes for
/// the rest.
#[derive(Clone)]
pub(super) struct Services<S> {
    direct: S,
    routes: Routes,
}

impl<S: Direct> Services<S> {
    /// `direct`, called for the paths of its service, and `routes` for every other.
    pub(super) fn new(direct: S, routes: Routes) -> Self {
        Self { direct, routes }
    }

    /// Every service on one set of routes, `S`'s among them.
    pub(super) fn routes(&self) -> &Routes {
        &self.routes
    }

    /// The answer to `request`, from the service its path names.
    pub(super) fn call(
        &mut self,
        request: Request<Body>,
    ) -> impl Future<Output = Result<Response<Body>, Infallible>> + Send + use<S> {
        if names(request.uri().path(), S::NAME) {
            Either::Left(self.direct.call(request))
        } else {
            Either::Right(self.routes.call(request))
        }
    }
}

/// Whether `path` is a method of the service named `service` (`/{service}/{method}`).
fn names(path: &str, service: &str) -> bool {
    path.strip_prefix('/')
        .and_then(|path| path.split_once('/'))
        .is_some_and(|(name, _)| name == service)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll};

    use super::*;

    const SERVICE: &str = "model_runtime.v1.ModelRuntime";

    /// A service that counts its calls and answers each with an empty response.
    #[derive(Clone, Default)]
    struct Counting(Arc<AtomicUsize>);

    impl NamedService for Counting {
        const NAME: &'static str = SERVICE;
    }

    impl Service<Request<Body>> for Counting {
        type Response = Response<Body>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Response<Body>, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<Body>) -> Self::Future {
            self.0.fetch_add(1, Ordering::Relaxed);
            std::future::ready(Ok(Response::new(Body::empty())))
        }
    }

    #[tokio::test]
    async fn only_the_services_own_methods_go_straight_to_it() {
        let counting = Counting::default();
        let mut services = Services::new(counting.clone(), Routes::default());
        for (path, direct) in [
            ("/model_runtime.v1.ModelRuntime/Execute", true),
            ("/model_runtime.v1.ModelRuntime/NoSuchMethod", true),
            ("/model_runtime.v1.ModelRuntimeX/Execute", false),
            ("/model_runtime.v1/ModelRuntime/Execute", false),
            ("/model_runtime.v1.ModelRuntime", false),
            ("/grpc.health.v1.Health/Check", false),
        ] {
            let before = counting.0.load(Ordering::Relaxed);
            let request = Request::builder().uri(path).body(Body::empty()).unwrap();
            let Ok(_) = services.call(request).await;
            let called = counting.0.load(Ordering::Relaxed) - before;
            assert_eq!(called, usize::from(direct), "{path}");
        }
    }
}
