//! What the plugins keep for one request from phase to phase: each plugin's own value (a
//! script's `ctx` table, say) and the fields they add to the request's access-log line.
//! Empty, it holds no allocation: requests whose plugins keep nothing pay nothing.

use std::any::Any;

/// One request's plugin state, carried by tether through every phase of the request.
#[derive(Default)]
pub struct RequestState {
    /// Each value under the id of the plugin instance that keeps it.
    values: Vec<(u64, Box<dyn Any + Send + Sync>)>,
    /// Access-log fields, in the order they were added.
    log_fields: Vec<(Box<str>, Box<str>)>,
}

impl RequestState {
    /// The value plugin `owner` keeps, if it keeps one of type `T`.
    pub fn get_mut<T: Any + Send + Sync>(&mut self, owner: u64) -> Option<&mut T> {
        self.values
            .iter_mut()
            .find(|(id, _)| *id == owner)
            .and_then(|(_, v)| v.downcast_mut())
    }

    /// Keeps `value` for plugin `owner` (replacing what it kept).
    pub fn insert<T: Any + Send + Sync>(&mut self, owner: u64, value: T) {
        self.values.retain(|(id, _)| *id != owner);
        self.values.push((owner, Box::new(value)));
    }

    /// Adds a field to the request's access-log line (a later one of the same name wins).
    pub fn add_log_field(&mut self, name: impl Into<Box<str>>, value: impl Into<Box<str>>) {
        let name = name.into();
        self.log_fields.retain(|(n, _)| *n != name);
        self.log_fields.push((name, value.into()));
    }

    /// The access-log fields the plugins added.
    pub fn log_fields(&self) -> &[(Box<str>, Box<str>)] {
        &self.log_fields
    }

    /// Takes the access-log fields (for the record, once the request is done).
    pub fn take_log_fields(&mut self) -> Vec<(Box<str>, Box<str>)> {
        std::mem::take(&mut self.log_fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_kept_per_plugin_and_fields_in_order() {
        let mut s = RequestState::default();
        assert!(s.get_mut::<u32>(1).is_none());
        s.insert(1, 7u32);
        s.insert(2, String::from("b"));
        *s.get_mut::<u32>(1).unwrap() += 1;
        assert_eq!(s.get_mut::<u32>(1), Some(&mut 8));
        // The wrong type is no value, not a panic.
        assert!(s.get_mut::<u32>(2).is_none());
        s.add_log_field("user", "001");
        s.add_log_field("tier", "gold");
        s.add_log_field("user", "002");
        let fields: Vec<_> = s.log_fields().iter().map(|(n, v)| (&**n, &**v)).collect();
        assert_eq!(fields, [("tier", "gold"), ("user", "002")]);
    }
}
