'use strict';
// A page asked for without a login answers with this form: come back to it after signing in.
document.addEventListener('DOMContentLoaded', () => {
  const path = window.location.pathname;
  if (path.startsWith('/console/') && path !== '/console/login') {
    document.getElementById('next').value = path;
  }
});
