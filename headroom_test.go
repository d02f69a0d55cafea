package throttle

// DefaultHeadroom is the default headroom under the name the feedback
// tests (quotaview_test.go) use. It exists in the tests only: the root
// exports no Default constants, WithHeadroom documents the value. Delete
// it once those tests name defaultHeadroom or move to their own package.
const DefaultHeadroom = defaultHeadroom
