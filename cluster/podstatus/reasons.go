package podstatus

// The reasons of the conditions a pod status carries (the condition types
// are apis/v1's Condition* constants). Every reason is named in
// docs/troubleshooting.md (docs/reasons_test.go checks it).
const (
	ReasonMounted       = "Mounted"
	ReasonRefreshed     = "Refreshed"
	ReasonRefreshFailed = "RefreshFailed"
	// ReasonInvalidAnnotation is the reason of a False RotationPolicyValid.
	ReasonInvalidAnnotation = "InvalidAnnotation"
	// ReasonObjectsChanged is the reason of a True ContentChanged.
	ReasonObjectsChanged = "ObjectsChanged"
)
