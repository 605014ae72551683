// Package poll is the one way tests wait for something an asynchronous
// part makes true: a condition checked at once and then again and again,
// at intervals that start at a few milliseconds and grow to a tenth of a
// second, until it holds, it fails, or a deadline that only a stuck test
// reaches has passed. It waits; it never asserts on timing.
//
//	poll.Until(t, "the Secret to be written", func(ctx context.Context) (bool, error) {
//		_, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
//		if apierrors.IsNotFound(err) {
//			return false, nil
//		}
//		return err == nil, err
//	})
package poll
