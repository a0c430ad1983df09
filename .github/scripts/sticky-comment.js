// Posts FILE as the pull request's sticky benchmark comment: the comment
// whose body starts with the durabench marker (reporters.Marker) is updated,
// or a new one is created. Used by .github/workflows/benchmark.yml for all
// three states: running, completed, failed.
module.exports = async ({ github, context, core }, file) => {
  const fs = require('fs');
  const marker = '<!-- durabench-benchmark -->';
  if (!fs.existsSync(file)) {
    core.warning(`no ${file} to post`);
    return;
  }
  const body = fs.readFileSync(file, 'utf8');
  if (!body.startsWith(marker)) {
    core.setFailed(`${file} does not start with ${marker}`);
    return;
  }
  const { owner, repo } = context.repo;
  const issue_number = context.issue.number;
  const comments = await github.paginate(github.rest.issues.listComments, {
    owner, repo, issue_number, per_page: 100,
  });
  const sticky = comments.find((c) => c.body && c.body.startsWith(marker));
  if (sticky) {
    await github.rest.issues.updateComment({ owner, repo, comment_id: sticky.id, body });
  } else {
    await github.rest.issues.createComment({ owner, repo, issue_number, body });
  }
};
