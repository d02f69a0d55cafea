// Package feedback is the fleet's model of the server's limiter: what this
// process makes of the rate-limit signals of the server's answers
// (header.Signal) against what the fleet itself sent. Views keeps one view
// per bucket: a ledger of the store's counts of what the fleet reported
// sent (ledger.go), whether the server's window is fixed or sliding, the
// rejections in a row, the pauses this process knows of. From one reading
// it works out what the store must do (Actions): pause the request's
// buckets, or cap a bucket below its rule at the room the server leaves
// the fleet (model.go has the model; docs/FEEDBACK.md tells it in full,
// with the measurements behind each constant).
//
// The root's Transport calls it around every request: Take and Untake
// around the store's Reserve (the units to report), Booked after it,
// Departed when the request leaves, Read with the response's signal, Paused
// and Recheck around the pauses. Take and Departed, the calls of every
// request, take no lock and allocate nothing once a bucket has its view;
// Booked and Read take the lock only when a server reported something.
//
// It imports internal/store and header only; it does not call the store:
// the root carries out the Actions (feedback.go).
package feedback
