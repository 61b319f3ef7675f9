// train_common_options.cpp: see train_common_options.hpp.
#include "tools/train_common_options.hpp"

#include "tools/quorum_train_checks.hpp"
#include "trainer/model_spec.hpp"

namespace quorum::train_options {

namespace checks = quorum::train_checks;

void add_data_options(CLI::App &app, CommonOptions *o) {
  app.add_option("--model", o->model, "model")
      ->check(CLI::IsMember(quorum::trainer::model_names()))
      ->capture_default_str();
  app.add_option("--backend", o->backend, "compute backend")
      ->check(CLI::IsMember({"ref", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--data", o->data, "data set")
      ->check(CLI::IsMember({"fashion-mnist", "cifar10", "synthetic"}))
      ->capture_default_str();
  app.add_option("--data-dir", o->data_dir,
                 "folder of the data files (default for fashion-mnist: Debian's "
                 "dataset-fashion-mnist location)");
  app.add_flag("--no-verify-data", o->no_verify,
               "accept Fashion-MNIST-shaped IDX files whose content differs from the package's");
  app.add_option("--train-limit", o->train_limit, "use only the first N training examples (0: all)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--test-limit", o->test_limit, "use only the first N test examples (0: all)")
      ->check(CLI::NonNegativeNumber);
}

void add_sgd_options(CLI::App &app, CommonOptions *o, const std::string &reference_batch_help,
                     const std::string &seed_help) {
  app.add_option("--lr", o->lr, "learning rate at --lr-reference-batch examples")
      ->check(checks::finite())
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--lr-reference-batch", o->lr_reference_batch, reference_batch_help)
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--momentum", o->momentum, "SGD momentum")
      ->check(checks::finite())
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--weight-decay", o->weight_decay, "L2 weight decay")
      ->check(checks::finite())
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--seed", o->seed, seed_help)->capture_default_str();
  app.add_option("--threads", o->threads,
                 "compute threads (cpu backend; more than 1 only pays on otherwise idle cores)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
}

}  // namespace quorum::train_options
