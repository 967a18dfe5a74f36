//! Message formats: properties strings, the stored-message record layout, compressed
//! bodies, and the messages applications send and receive.

pub mod compression;
pub mod properties;
pub mod stored;
pub mod user;

pub use compression::{CompressionError, CompressionType};
pub use properties::{Properties, PropertiesError};
pub use stored::{StoredMessage, StoredMessageError, StoredMessageView};
pub use user::{decode_messages, Delivery, Message, MessageError, MessageExt, DELAY_LEVEL_MAX, DELAY_LEVEL_MIN};
