package convert

// CorpusOptions reads a corpus case's options (its first line) for the
// end-to-end tests of package convert_test.
var CorpusOptions = corpusOptions
