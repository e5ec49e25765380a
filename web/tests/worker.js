// Runs one of the browser build's programs (a factory made by Emscripten with -sMODULARIZE) in this Worker, so that
// long work never holds the page's thread. Messages: in {program, args}; out {line, stream} per line printed, then
// {exit} with the status the program printed (WGTRAIN_EXIT n) or 1 if it aborted.
self.onmessage = function(e) {
  var program = e.data.program, args = e.data.args || [];
  var factories = {wgtrain_web_tests: 'createWgtrainTests', wgtrain_parity: 'createWgtrainParity',
                   wgtrain_web_tokenizer_tests: 'createWgtrainTokenizerTests'};
  if (!factories[program]) {
    self.postMessage({line: 'unknown program ' + program, stream: 'stderr'});
    self.postMessage({exit: 1});
    return;
  }
  importScripts(program + '.js');
  var done = false;
  function finish(code) {
    if (done) return;
    done = true;
    self.postMessage({exit: code});
  }
  function print(stream) {
    return function(text) {
      self.postMessage({line: text, stream: stream});
      var m = /^WGTRAIN_EXIT (\d+)$/.exec(text);
      if (m) finish(Number(m[1]));
    };
  }
  self[factories[program]]({
    arguments: args,
    print: print('stdout'),
    printErr: print('stderr'),
    onAbort: function(what) {
      self.postMessage({line: 'aborted: ' + what, stream: 'stderr'});
      finish(1);
    },
  }).catch(function(err) {
    self.postMessage({line: 'failed to start: ' + err, stream: 'stderr'});
    finish(1);
  });
};
