//! Map layouts shared between bee's user space and its kernel programs.
#![no_std]
