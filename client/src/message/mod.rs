//! Message formats: properties strings and the stored-message record layout.

pub mod properties;
pub mod stored;

pub use properties::{Properties, PropertiesError};
pub use stored::{StoredMessage, StoredMessageError, StoredMessageView};
