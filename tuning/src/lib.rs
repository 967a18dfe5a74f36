//! Tuning profiles (broker flush/shard settings, kernel settings) and their reader: issue 5.
