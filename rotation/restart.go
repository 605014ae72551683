package rotation

import "strconv"

// RestartEnabled reports whether a change of a class's volume restarts the
// pod's workload, from the RestartAnnotation of the pod and of the class
// (either map may be nil): the pod's value decides when it is a boolean
// ("true", "false"), else the class's; off when neither says true.
func RestartEnabled(pod, class map[string]string) bool {
	if on, err := strconv.ParseBool(pod[RestartAnnotation]); err == nil {
		return on
	}
	on, err := strconv.ParseBool(class[RestartAnnotation])
	return err == nil && on
}
