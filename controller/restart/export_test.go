package restart

// SecretAnnotationValue lets the black-box tests (package restart_test)
// compute the annotation a Secret's change writes.
var SecretAnnotationValue = secretAnnotationValue
