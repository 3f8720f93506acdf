//! A request's fields as the routing decision and the proxy core read them: the values of
//! a field by name, in order. Pingora's `HeaderMap` is one; tether's HTTP/1 engine reads
//! them straight from its read buffer (`crate::wire::http1::head`), without building a map.

use http::header::{HeaderMap, HeaderName};

pub trait Fields {
    /// The values of the fields called `name`, in the order they came (or from the last).
    fn values<'a>(&'a self, name: &'a HeaderName)
        -> impl DoubleEndedIterator<Item = &'a [u8]> + 'a;

    /// The first field called `name`.
    fn first<'a>(&'a self, name: &'a HeaderName) -> Option<&'a [u8]> {
        self.values(name).next()
    }
}

impl Fields for HeaderMap {
    fn values<'a>(
        &'a self,
        name: &'a HeaderName,
    ) -> impl DoubleEndedIterator<Item = &'a [u8]> + 'a {
        self.get_all(name).iter().map(|v| v.as_bytes())
    }
}
